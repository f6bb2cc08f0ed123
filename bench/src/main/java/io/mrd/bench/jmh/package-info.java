/**
 * JMH benchmarks of the lookup path (top half, bottom half, global cache, the whole lkey path) and of the
 * global-cache writer. Each {@code @Benchmark} keeps its measured loop in its own method, over {@link
 * io.mrd.bench.jmh.Batch} addresses, so that JMH measures what the JIT makes of that loop alone; the repeated
 * loop shape across benchmarks is deliberate, not a helper waiting to be extracted.
 */
package io.mrd.bench.jmh;
