/**
 * The multi-process bench: a real daemon, secondary JVMs doing lookups while a writer churns memory, and the
 * create round trip timed over the client's own {@code DaemonConnection}. Child processes report through
 * {@code Handshake} lines; HdrHistogram gives the percentiles.
 */
package io.mrd.bench.multi;
