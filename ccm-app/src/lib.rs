//! The cloud controller manager runtime: flags, leader election, admin server, controller wiring.
