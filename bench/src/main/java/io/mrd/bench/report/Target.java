package io.mrd.bench.report;

/**
 * What a row must reach: a ceiling ({@code ≤}: a ratio of times, a margin in µs) or a floor ({@code ≥}: a ratio
 * of rates), with the text the table shows. A value equal to the limit meets it.
 */
public record Target(String text, boolean atMost, double limit)
{
    /**
     * A row's verdict over its rounds, as the table's last column says it.
     */
    public enum Verdict
    {
        /** Every round met the target (so did the median). */
        MET("met"),
        /** Some rounds met it and some did not: the range crosses the target, a run can land either side. */
        UNSTABLE("unstable"),
        /** No round met it. */
        NO("no");

        private final String word;

        Verdict(final String word)
        {
            this.word = word;
        }

        public String word()
        {
            return word;
        }
    }

    public static Target atMost(final double limit, final String text)
    {
        return new Target(text, true, limit);
    }

    public static Target atLeast(final double limit, final String text)
    {
        return new Target(text, false, limit);
    }

    public boolean meets(final double value)
    {
        return atMost ? value <= limit : value >= limit;
    }

    /**
     * Met only when the whole range meets the target; unstable when the range crosses it, whichever side the
     * median is on, since another run's median can land on the other side.
     */
    public Verdict verdict(final Spread spread)
    {
        final boolean least = meets(spread.min());
        final boolean greatest = meets(spread.max());
        if (least && greatest)
        {
            return Verdict.MET;
        }
        return least || greatest ? Verdict.UNSTABLE : Verdict.NO;
    }
}
