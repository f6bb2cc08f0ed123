package io.mrd.bench.jmh;

import io.mrd.bench.JvmFlags;
import io.mrd.bench.Plan;
import io.mrd.bench.fixture.GlobalCacheFixture;
import io.mrd.bench.report.ResultFile;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.infra.BenchmarkParams;
import org.openjdk.jmh.results.BenchmarkResult;
import org.openjdk.jmh.results.IterationResult;
import org.openjdk.jmh.results.RunResult;
import org.openjdk.jmh.runner.Runner;
import org.openjdk.jmh.runner.RunnerException;
import org.openjdk.jmh.runner.format.OutputFormat;
import org.openjdk.jmh.runner.options.ChainedOptionsBuilder;
import org.openjdk.jmh.runner.options.OptionsBuilder;
import org.openjdk.jmh.runner.options.TimeValue;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

/**
 * One round of some of this package's JMH benchmarks through JMH's Runner API: average time in ns per lookup,
 * one fork per benchmark started with the mrd JVM flags, JMH's log to the caller's output, and one line per
 * benchmark to {@code jmh.tsv} named as the C reference names its rows (method name, then the parameter values:
 * {@code global.65536}) with the round.
 * <p>
 * The value in {@code jmh.tsv} is the round's best (lowest) measured iteration, the mean in the note: this
 * machine class is small and shared, and a descheduled iteration says nothing about the code. The C reference
 * reports the best of its timed runs likewise, so the ratio compares like with like.
 * <p>
 * Per round: smoke 1 warm-up and 1 measured iteration of 0.1 s; quick 2 and 3 of 0.25 s; full 2 and 3 of 0.5 s.
 * Rounds, not forks, are the unit of repetition: each round is a fresh fork, and a fork's start (about a second
 * here) is what a round costs beyond its iterations.
 */
final class JmhRunner
{
    private JmhRunner()
    {
    }

    /** Seconds of one iteration, warm-up or measured: the C reference's timed runs are as long. */
    static double iterationSeconds(final Plan plan)
    {
        return plan.pick(0.1, 0.25, 0.5);
    }

    /** Measured iterations per round, of which the best counts: the C reference's timed runs are as many. */
    static int measuredIterations(final Plan plan)
    {
        return plan.pick(1, 3, 3);
    }

    /**
     * @param include JMH's include regex of the benchmarks to run.
     * @param params  parameter values to restrict to (JMH's {@code -p}), empty for all.
     * @return JMH's results, for the JSON of the whole run.
     */
    static Collection<RunResult> round(final Plan plan, final Path out, final String include,
        final Map<String, String> params, final int round, final OutputFormat log) throws RunnerException
    {
        final List<String> jvmArgs = new ArrayList<>(JvmFlags.flags());
        jvmArgs.add("-Xms1g");
        jvmArgs.add("-Xmx1g");
        jvmArgs.add("-D" + ResultFile.OUT_PROPERTY + "=" + out.toAbsolutePath());
        jvmArgs.add("-D" + ResultFile.ROUND_PROPERTY + "=" + round);
        jvmArgs.add("-Dmrd.bench.tmp=" + GlobalCacheFixture.baseDirectory());
        final TimeValue iteration = TimeValue.milliseconds(Math.round(iterationSeconds(plan) * 1000));
        final ChainedOptionsBuilder options = new OptionsBuilder()
            .include(include)
            .mode(Mode.AverageTime)
            .timeUnit(TimeUnit.NANOSECONDS)
            .forks(1)
            .warmupIterations(plan.pick(1, 2, 2))
            .warmupTime(iteration)
            .measurementIterations(measuredIterations(plan))
            .measurementTime(iteration)
            .threads(1)
            .shouldFailOnError(true)
            .jvmArgsAppend(jvmArgs.toArray(new String[0]));
        params.forEach(options::param);
        final Collection<RunResult> results = new Runner(options.build(), log).run();
        final Path tsv = out.resolve("jmh.tsv");
        for (final RunResult run : results)
        {
            final BenchmarkResult aggregate = run.getAggregatedResult();
            final BenchmarkParams benchmark = run.getParams();
            final String method = benchmark.getBenchmark().substring(benchmark.getBenchmark().lastIndexOf('.') + 1);
            final StringBuilder row = new StringBuilder(method);
            for (final String value : paramMap(benchmark).values())
            {
                row.append('.').append(value);
            }
            final double mean = aggregate.getPrimaryResult().getScore();
            double best = Double.MAX_VALUE;
            for (final BenchmarkResult fork : run.getBenchmarkResults())
            {
                for (final IterationResult iterationResult : fork.getIterationResults())
                {
                    best = Math.min(best, iterationResult.getPrimaryResult().getScore());
                }
            }
            ResultFile.append(tsv, new ResultFile.Result("java", row.toString(), round, best, "ns",
                String.format(Locale.ROOT, "best iteration; mean %.3f", mean)));
        }
        return results;
    }

    private static TreeMap<String, String> paramMap(final BenchmarkParams params)
    {
        final TreeMap<String, String> map = new TreeMap<>();
        for (final String key : params.getParamsKeys())
        {
            map.put(key, params.getParam(key));
        }
        return map;
    }
}
