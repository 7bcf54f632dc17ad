//! Example cloud controller managers built with the SDK.
