/** Probes and scrapes: never traced. (A module of its own: without an exporter no instrumentation loads.) */
export const UNTRACED = /^\/(health|metrics)\b/;
