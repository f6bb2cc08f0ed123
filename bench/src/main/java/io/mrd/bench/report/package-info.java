/**
 * Turns a run's result files (TSV, a value per row and round) into BENCHMARKS.md's table (each row against its
 * reference of the same round: the median over the rounds, the range and the verdict) and the lookup plot.
 */
package io.mrd.bench.report;
