package io.mrd.bench.jmh;

import io.mrd.bench.JvmFlags;
import io.mrd.bench.fixture.GlobalCacheFixture;
import io.mrd.bench.report.ResultFile;
import org.openjdk.jmh.results.BenchmarkResult;
import org.openjdk.jmh.results.IterationResult;
import org.openjdk.jmh.results.RunResult;
import org.openjdk.jmh.results.format.ResultFormatType;
import org.openjdk.jmh.runner.Runner;
import org.openjdk.jmh.runner.RunnerException;
import org.openjdk.jmh.runner.options.ChainedOptionsBuilder;
import org.openjdk.jmh.runner.options.OptionsBuilder;
import org.openjdk.jmh.runner.options.TimeValue;
import org.openjdk.jmh.annotations.Mode;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Locale;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

/**
 * Runs the JMH benchmarks of this package through JMH's Runner API: average time in ns per lookup, forks
 * started with the mrd JVM flags, JSON to {@code jmh.json} and JMH's log to {@code jmh.log} in the results
 * directory, and one line per benchmark to {@code jmh.tsv} named as the C reference names its rows
 * (method name, then the parameter values: {@code global.65536}).
 * <p>
 * The value in {@code jmh.tsv} is the best (lowest) measured iteration, the mean and its error are in the
 * note: this machine class is small and shared, and a descheduled iteration says nothing about the code.
 * The C reference reports the best of its timed runs likewise, so the ratio compares like with like.
 * <p>
 * Quick: 1 fork, 2 warm-up iterations of 0.5 s, 3 measured iterations of 1 s. Full: 2 forks, 3 of 1 s, 5 of 2 s.
 */
public final class JmhRunner
{
    private JmhRunner()
    {
    }

    public static void run(final boolean quick, final Path out, final String include) throws RunnerException
    {
        final List<String> jvmArgs = new ArrayList<>(JvmFlags.flags());
        jvmArgs.add("-Xms1g");
        jvmArgs.add("-Xmx1g");
        jvmArgs.add("-D" + ResultFile.OUT_PROPERTY + "=" + out.toAbsolutePath());
        jvmArgs.add("-Dmrd.bench.tmp=" + GlobalCacheFixture.baseDirectory());
        final ChainedOptionsBuilder options = new OptionsBuilder()
            .include(null == include ? JmhRunner.class.getPackageName().replace(".", "\\.") + "\\..*" : include)
            .mode(Mode.AverageTime)
            .timeUnit(TimeUnit.NANOSECONDS)
            .forks(quick ? 1 : 2)
            .warmupIterations(quick ? 2 : 3)
            .warmupTime(quick ? TimeValue.milliseconds(500) : TimeValue.seconds(1))
            .measurementIterations(quick ? 3 : 5)
            .measurementTime(quick ? TimeValue.seconds(1) : TimeValue.seconds(2))
            .threads(1)
            .shouldFailOnError(true)
            .jvmArgsAppend(jvmArgs.toArray(new String[0]))
            .resultFormat(ResultFormatType.JSON)
            .result(out.resolve("jmh.json").toString())
            .output(out.resolve("jmh.log").toString());
        final Collection<RunResult> results = new Runner(options.build()).run();
        final Path tsv = out.resolve("jmh.tsv");
        for (final RunResult run : results)
        {
            final BenchmarkResult aggregate = run.getAggregatedResult();
            final var params = run.getParams();
            final String method = params.getBenchmark().substring(params.getBenchmark().lastIndexOf('.') + 1);
            final StringBuilder row = new StringBuilder(method);
            for (final String key : new TreeMap<>(paramMap(params)).values())
            {
                row.append('.').append(key);
            }
            final double mean = aggregate.getPrimaryResult().getScore();
            final double error = aggregate.getPrimaryResult().getScoreError();
            double best = Double.MAX_VALUE;
            for (final BenchmarkResult fork : run.getBenchmarkResults())
            {
                for (final IterationResult iteration : fork.getIterationResults())
                {
                    best = Math.min(best, iteration.getPrimaryResult().getScore());
                }
            }
            ResultFile.append(tsv, new ResultFile.Result("java", row.toString(), best, "ns",
                String.format(Locale.ROOT, "best iteration; mean %.3f ±%.3f (99.9%% CI)", mean, error)));
            System.out.printf(Locale.ROOT, "jmh: %-24s best %10.3f ns, mean %10.3f ns%n", row, best, mean);
        }
    }

    private static TreeMap<String, String> paramMap(final org.openjdk.jmh.infra.BenchmarkParams params)
    {
        final TreeMap<String, String> map = new TreeMap<>();
        for (final String key : params.getParamsKeys())
        {
            map.put(key, params.getParam(key));
        }
        return map;
    }
}
