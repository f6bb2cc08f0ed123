package io.mrd.testing;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code promtool check metrics}: Prometheus' own lint of an exposition (metric names in base units, counters
 * ending in {@code _total}, HELP and TYPE lines, histograms' {@code _bucket}/{@code _sum}/{@code _count}).
 * Skipped where promtool is not installed (see {@link ExternalTool}). {@link #assertHistogram} adds what the lint
 * does not check: that a histogram's buckets are cumulative and end in {@code +Inf} at its {@code _count}.
 */
public final class PromtoolCheck
{
    private PromtoolCheck()
    {
    }

    /**
     * @param what       where the text came from, for the failure message.
     * @param exposition Prometheus text format.
     */
    public static void assertClean(final String what, final String exposition)
    {
        final ExternalTool.Result result = ExternalTool.require("promtool").run(exposition, "check", "metrics");
        assertEquals(0, result.exitCode(), "promtool check metrics rejects " + what + ":\n" + result.output());
        assertEquals("", result.output().strip(), "promtool check metrics has findings on " + what);
    }

    /**
     * @return every sample of the exposition, keyed by its name and labels as written
     * ({@code mrd_x_bucket{type="alloc",le="0.001"}}), in order.
     */
    public static Map<String, Double> samples(final String exposition)
    {
        final Map<String, Double> samples = new LinkedHashMap<>();
        for (final String line : exposition.lines().toList())
        {
            if (line.isEmpty() || line.startsWith("#"))
            {
                continue;
            }
            final int space = line.lastIndexOf(' ');
            samples.put(line.substring(0, space), Double.parseDouble(line.substring(space + 1)));
        }
        return samples;
    }

    /**
     * Checks one series of a classic histogram: buckets that never decrease, the last one {@code +Inf} and equal
     * to {@code _count}, which is {@code expectedCount}.
     *
     * @param name   the histogram's name, without suffix.
     * @param labels its labels but {@code le}, as written ({@code type="create_mr"}), or empty.
     * @return the series' cumulative bucket counts by {@code le}, {@code +Inf} last; its sum under "sum".
     */
    public static Map<String, Double> assertHistogram(
        final String what, final String exposition, final String name, final String labels, final long expectedCount)
    {
        final Map<String, Double> samples = samples(exposition);
        final String prefix = name + "_bucket{" + (labels.isEmpty() ? "" : labels + ",") + "le=\"";
        final Map<String, Double> buckets = new LinkedHashMap<>();
        final List<Double> counts = new ArrayList<>();
        for (final Map.Entry<String, Double> sample : samples.entrySet())
        {
            if (sample.getKey().startsWith(prefix))
            {
                final String le = sample.getKey().substring(prefix.length(), sample.getKey().length() - 2);
                buckets.put(le, sample.getValue());
                counts.add(sample.getValue());
            }
        }
        assertFalse(counts.isEmpty(), what + ": no bucket of " + name + "{" + labels + "}:\n" + exposition);
        for (int i = 1; i < counts.size(); i++)
        {
            assertTrue(counts.get(i) >= counts.get(i - 1), what + ": " + name + "{" + labels + "} buckets decrease: " +
                buckets);
        }
        assertEquals("+Inf", List.copyOf(buckets.keySet()).getLast(), what + ": the last bucket of " + name);
        final String suffix = labels.isEmpty() ? "" : "{" + labels + "}";
        final Double count = samples.get(name + "_count" + suffix);
        final Double sum = samples.get(name + "_sum" + suffix);
        assertNotNull(count, what + ": no " + name + "_count" + suffix);
        assertNotNull(sum, what + ": no " + name + "_sum" + suffix);
        assertEquals(count, counts.getLast(), what + ": +Inf bucket of " + name + suffix + " is not its _count");
        assertEquals(expectedCount, count.longValue(), what + ": " + name + "_count" + suffix);
        buckets.put("sum", sum);
        return buckets;
    }
}
