{{/* The namespace of the ServiceAccount and the Deployment. */}}
{{- define "ccm.namespace" -}}
{{- .Values.namespace | default .Release.Namespace -}}
{{- end -}}

{{/* The Lease's namespace and name. */}}
{{- define "ccm.leaseNamespace" -}}
{{- .Values.leaderElection.resourceNamespace | default (include "ccm.namespace" .) -}}
{{- end -}}
{{- define "ccm.leaseName" -}}
{{- .Values.leaderElection.resourceName | default .Values.name -}}
{{- end -}}

{{/* The labels of every object (the same as deploy/*.yaml). */}}
{{- define "ccm.labels" -}}
app.kubernetes.io/component: cloud-controller-manager
app.kubernetes.io/name: {{ .Values.name }}
{{- end -}}

{{/* repository[:tag][@digest]; the tag defaults to the chart's appVersion. */}}
{{- define "ccm.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion -}}
{{- $ref := .Values.image.repository -}}
{{- if $tag }}{{ $ref = printf "%s:%s" $ref $tag }}{{ end -}}
{{- if .Values.image.digest }}{{ $ref = printf "%s@%s" $ref .Values.image.digest }}{{ end -}}
{{- $ref -}}
{{- end -}}

{{/* Values that cannot work together fail the rendering with the reason. */}}
{{- define "ccm.validate" -}}
{{- if not .Values.name }}{{ fail "values: name must not be empty" }}{{ end -}}
{{- if not .Values.image.repository }}{{ fail "values: image.repository must not be empty" }}{{ end -}}
{{- if and (gt (int .Values.replicas) 1) (not .Values.leaderElection.enabled) -}}
{{- fail "values: replicas > 1 needs leaderElection.enabled=true (replicas without leader election would all run the controllers)" -}}
{{- end -}}
{{- if and .Values.image.digest (not (regexMatch "^sha256:[0-9a-f]{64}$" .Values.image.digest)) -}}
{{- fail (printf "values: image.digest must be sha256:<64 lower-case hex digits>, not %q" .Values.image.digest) -}}
{{- end -}}
{{- end -}}
