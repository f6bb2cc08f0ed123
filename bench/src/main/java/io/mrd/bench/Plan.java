package io.mrd.bench;

import java.util.List;

/**
 * A part's plan: its mode and its number of rounds. A round measures a row and its reference back to back; the
 * order alternates from one round to the next (row first in odd rounds, reference first in even ones), so that a
 * machine drifting during the run favours neither side, and the report compares each row with its reference
 * round by round.
 */
public record Plan(Mode mode, int rounds)
{
    public Plan
    {
        if (rounds < 1)
        {
            throw new IllegalArgumentException("--rounds must be at least 1, not " + rounds);
        }
    }

    public int pick(final int smoke, final int quick, final int full)
    {
        return switch (mode)
        {
            case SMOKE -> smoke;
            case QUICK -> quick;
            case FULL -> full;
        };
    }

    public double pick(final double smoke, final double quick, final double full)
    {
        return switch (mode)
        {
            case SMOKE -> smoke;
            case QUICK -> quick;
            case FULL -> full;
        };
    }

    /**
     * Runs {@code steps} in order in odd rounds and in reverse order in even rounds.
     */
    public static void alternate(final int round, final List<Runnable> steps)
    {
        for (int i = 0; i < steps.size(); i++)
        {
            steps.get(round % 2 == 1 ? i : steps.size() - 1 - i).run();
        }
    }
}
