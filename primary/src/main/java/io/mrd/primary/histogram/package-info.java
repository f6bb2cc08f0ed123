/**
 * The daemon's latency and size histograms ({@link io.mrd.layout.MrdHistogram}): {@code Histograms} is all the
 * engine, the provider wrapper and the server see (one call per thing measured, no HdrHistogram type);
 * {@code DaemonHistograms} records with HdrHistogram and publishes the encodings into the control file's
 * histograms section at every heartbeat, where the tools' {@code PublishedHistogram} decodes them for
 * {@code mrd stat} and the metrics.
 */
package io.mrd.primary.histogram;
