package io.mrd.bench.jmh;

import io.mrd.bench.CProgram;
import io.mrd.bench.Plan;
import io.mrd.bench.fixture.GlobalCacheFixture;
import org.openjdk.jmh.results.RunResult;
import org.openjdk.jmh.results.format.ResultFormatFactory;
import org.openjdk.jmh.results.format.ResultFormatType;
import org.openjdk.jmh.runner.RunnerException;
import org.openjdk.jmh.runner.format.OutputFormat;
import org.openjdk.jmh.runner.format.OutputFormatFactory;
import org.openjdk.jmh.runner.options.VerboseMode;

import java.io.FileOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The JMH benchmarks in rounds, each family alternating with its C reference ({@code lookup_ref --rows FAMILY},
 * one round of the same rows): in odd rounds JMH first, in even rounds C first, so Java and C of a round run
 * seconds apart, not minutes. Families without a C reference (the pool against Netty, which are two benchmarks
 * of one JMH round; the journal append) run in the same rounds. Writes {@code jmh.tsv}, {@code c-lookup.tsv}
 * (with {@code globalwriter.rate} of Java in {@code jmh-writer.tsv}), JMH's log to {@code jmh.log}, the C
 * program's to {@code c-lookup.log}, and JMH's JSON of every round to {@code jmh.json}.
 * <p>
 * The C reference times as long as JMH measures per round: smoke 1 run of 0.1 s, quick 3 of 0.25 s, full 3 of
 * 0.5 s, after a warm-up run of the same length, the best kept.
 */
public final class LookupRounds
{
    /**
     * Benchmarks run together and the C rows they are compared with.
     *
     * @param include JMH's include regex.
     * @param params  JMH parameters to restrict to.
     * @param cRows   {@code lookup_ref --rows}, or null when the family's reference is in JMH.
     */
    record Family(String name, String include, Map<String, String> params, String cRows)
    {
    }

    static final List<Family> FAMILIES = List.of(
        // A cache of device 0 or 7 of 8 (issue 23) runs in the family of the C rows it is compared with.
        new Family("tophalf", jmh("(TopHalfBenchmark|HandleKeyBenchmark)") + "|" + jmh("DeviceCacheBenchmark") +
            "deviceMru$", Map.of(), "tophalf"),
        new Family("bottomhalf", jmh("BottomHalfBenchmark"), Map.of(), "bottomhalf"),
        new Family("global", jmh("GlobalCacheBenchmark"), Map.of(), "global"),
        new Family("lkey", jmh("LkeyPathBenchmark") + "|" + jmh("DeviceCacheBenchmark") + "deviceLkey$", Map.of(),
            "lkey"),
        new Family("globalwriter", jmh("GlobalWriterBenchmark"), Map.of(), "globalwriter"),
        new Family("pool", jmh("PoolBenchmark") + "(pool|netty)(AcquireRelease|TwoThreads)$", Map.of(), null),
        // Only 4 KiB has a row: the key does not depend on the buffer's size.
        new Family("poolkey", jmh("PoolBenchmark") + "poolKey$", Map.of("size", "4096"), null),
        new Family("journal", jmh("JournalAppendBenchmark"), Map.of(), null));

    private LookupRounds()
    {
    }

    private static String jmh(final String classes)
    {
        return "^" + LookupRounds.class.getPackageName().replace(".", "\\.") + "\\." + classes + "\\.";
    }

    /**
     * @param include a JMH include regex to run instead of the families (an experiment: no C reference), or null.
     */
    public static void run(final Plan plan, final Path out, final String include) throws RunnerException
    {
        final List<Family> families = null == include ? FAMILIES : List.of(new Family("include", include, Map.of(),
            null));
        final List<RunResult> all = new ArrayList<>();
        try (PrintStream log = new PrintStream(new FileOutputStream(out.resolve("jmh.log").toFile(), true), true,
            StandardCharsets.UTF_8))
        {
            final OutputFormat format = OutputFormatFactory.createFormatInstance(log, VerboseMode.NORMAL);
            for (int round = 1; round <= plan.rounds(); round++)
            {
                for (final Family family : families)
                {
                    System.out.printf("jmh: round %d of %d, %s%n", round, plan.rounds(), family.name());
                    final int r = round;
                    final List<Runnable> steps = new ArrayList<>();
                    steps.add(() -> all.addAll(java(plan, out, family, r, format)));
                    if (null != family.cRows())
                    {
                        steps.add(() -> c(plan, out, family, r));
                    }
                    Plan.alternate(round, steps);
                }
            }
        }
        catch (final JmhFailure failure)
        {
            throw failure.getCause();
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException("cannot write " + out.resolve("jmh.log"), ex);
        }
        finally
        {
            ResultFormatFactory.getInstance(ResultFormatType.JSON, out.resolve("jmh.json").toString()).writeOut(all);
        }
    }

    private static List<RunResult> java(final Plan plan, final Path out, final Family family, final int round,
        final OutputFormat format)
    {
        try
        {
            return new ArrayList<>(JmhRunner.round(plan, out, family.include(), family.params(), round, format));
        }
        catch (final RunnerException ex)
        {
            throw new JmhFailure(ex);
        }
    }

    private static void c(final Plan plan, final Path out, final Family family, final int round)
    {
        CProgram.run("lookup_ref", List.of("--dir", GlobalCacheFixture.baseDirectory().toString(),
            "--rows", family.cRows(), "--round", String.valueOf(round),
            "--runs", String.valueOf(JmhRunner.measuredIterations(plan)),
            "--seconds", String.valueOf(JmhRunner.iterationSeconds(plan))),
            out.resolve("c-lookup.tsv"), out.resolve("c-lookup.log"), Duration.ofMinutes(5));
    }

    /** Carries JMH's checked exception out of a round's step. */
    private static final class JmhFailure extends RuntimeException
    {
        private static final long serialVersionUID = 1L;

        JmhFailure(final RunnerException cause)
        {
            super(cause);
        }

        @Override
        public synchronized RunnerException getCause()
        {
            return (RunnerException)super.getCause();
        }
    }
}
