/**
 * Benchmarks of alternatives the code did not take (an inlined seqlock read, other ways to read devGen), kept
 * because BENCHMARKS.md cites their figures. Not part of {@code scripts/bench}'s default run.
 */
package io.mrd.bench.experiment;
