/**
 * Turns a run's result files (TSV) into BENCHMARKS.md's table (ratios against the C reference of the same run)
 * and the lookup plot.
 */
package io.mrd.bench.report;
