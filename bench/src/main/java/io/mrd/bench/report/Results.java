package io.mrd.bench.report;

import io.mrd.bench.report.ResultFile.Result;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.OptionalDouble;
import java.util.SortedMap;
import java.util.TreeMap;

/**
 * A run's results joined: every row's value in each round it was measured in, by {@link Result#key()}. A value
 * that is NaN (a part that could not measure it) counts as missing.
 */
public final class Results
{
    private final Map<String, TreeMap<Integer, Result>> byKey = new LinkedHashMap<>();

    /**
     * Adds one result; a later one for the same source, row and round replaces the earlier.
     */
    public void add(final Result result)
    {
        byKey.computeIfAbsent(result.key(), key -> new TreeMap<>()).put(result.round(), result);
    }

    /**
     * @return the row's values by round, without the missing ones; empty when the row was never measured.
     */
    public SortedMap<Integer, Double> rounds(final String source, final String row)
    {
        final TreeMap<Integer, Result> results = byKey.get(source + ":" + row);
        if (null == results)
        {
            return Collections.emptySortedMap();
        }
        final TreeMap<Integer, Double> values = new TreeMap<>();
        results.forEach((round, result) ->
        {
            if (!Double.isNaN(result.value()))
            {
                values.put(round, result.value());
            }
        });
        return values;
    }

    /**
     * @return the median over the row's rounds, or empty when it has none.
     */
    public OptionalDouble median(final String source, final String row)
    {
        final SortedMap<Integer, Double> values = rounds(source, row);
        return values.isEmpty() ? OptionalDouble.empty() :
            OptionalDouble.of(Spread.of(new ArrayList<>(values.values())).median());
    }

    /**
     * @return the sum over the row's rounds (0 when it has none): counts, such as failed lookups.
     */
    public double sum(final String source, final String row)
    {
        return rounds(source, row).values().stream().mapToDouble(Double::doubleValue).sum();
    }

    /**
     * @return one result per row, its value the median over its rounds (round 0): what the plot draws.
     */
    public Map<String, Result> medians()
    {
        final Map<String, Result> medians = new LinkedHashMap<>();
        byKey.forEach((key, results) ->
        {
            final Result first = results.firstEntry().getValue();
            final OptionalDouble median = median(first.source(), first.row());
            medians.put(key, new Result(first.source(), first.row(), 0,
                median.isPresent() ? median.getAsDouble() : Double.NaN, first.unit(), first.note()));
        });
        return medians;
    }
}
