/**
 * The benchmark program ({@code scripts/bench}): {@code BenchMain} dispatches to the JMH runs, the
 * multi-process bench and the report; {@code Plan} (with {@code Mode}) says how long each part measures and in
 * how many rounds, each row beside its reference; {@code CProgram} runs a C reference between the Java
 * measurements it is compared with; {@code JvmFlags} gives forked JVMs the flags every mrd process needs.
 * <p>
 * What belongs in the subpackages: JMH benchmarks ({@code jmh}), one-off experiments kept for the findings in
 * BENCHMARKS.md ({@code experiment}), fixtures that build a control file without a daemon ({@code fixture}),
 * the daemon-plus-secondaries bench ({@code multi}) and the result table and plot ({@code report}). Nothing here
 * reaches into another module's package: benchmarks use the modules' public API, as a user would.
 */
package io.mrd.bench;
