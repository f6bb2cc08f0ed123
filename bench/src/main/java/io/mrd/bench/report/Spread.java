package io.mrd.bench.report;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Optional;
import java.util.SortedMap;
import java.util.function.DoubleBinaryOperator;

/**
 * A row's figure over its rounds: the median (of an even count, the mean of the middle two), the least and the
 * greatest, and how many rounds there were. The median is what the table reports, the range is how far the
 * machine moved it between rounds.
 */
public record Spread(double median, double min, double max, int rounds)
{
    /**
     * @param values one per round; at least one.
     */
    public static Spread of(final Collection<Double> values)
    {
        if (values.isEmpty())
        {
            throw new IllegalArgumentException("a spread needs at least one round");
        }
        final List<Double> sorted = new ArrayList<>(values);
        sorted.sort(null);
        final int n = sorted.size();
        final double median = n % 2 == 1 ? sorted.get(n / 2) : (sorted.get(n / 2 - 1) + sorted.get(n / 2)) / 2;
        return new Spread(median, sorted.getFirst(), sorted.getLast(), n);
    }

    /**
     * The per-round figure of a row against its reference: {@code perRound(row, reference)} for every round both
     * were measured in, since only a row and a reference of the same round ran back to back.
     *
     * @return the spread of those figures, or empty when no round has both.
     */
    public static Optional<Spread> paired(final SortedMap<Integer, Double> row,
        final SortedMap<Integer, Double> reference, final DoubleBinaryOperator perRound)
    {
        final List<Double> values = new ArrayList<>();
        row.forEach((round, value) ->
        {
            final Double other = reference.get(round);
            if (null != other)
            {
                values.add(perRound.applyAsDouble(value, other));
            }
        });
        return values.isEmpty() ? Optional.empty() : Optional.of(of(values));
    }
}
