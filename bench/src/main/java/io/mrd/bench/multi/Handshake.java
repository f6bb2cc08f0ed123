package io.mrd.bench.multi;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.Predicate;

/**
 * How the benchmark's processes line up without sleeps as synchronisation: a child prints {@link #READY}
 * once warmed up, then waits blocked on its standard input for commands; the orchestrator sends them to
 * every participant of a run at once, so that all measure the same seconds. A child's numbers come back as
 * one {@link #RESULT} line of {@code key=value} pairs, starting with {@code run=K}.
 */
final class Handshake
{
    static final String READY = "READY";
    static final String RESULT = "RESULT";
    static final String QUIT = "quit";

    private Handshake()
    {
    }

    /**
     * @return the predicate of run {@code run}'s RESULT line.
     */
    static Predicate<String> resultOf(final int run)
    {
        final String prefix = RESULT + " run=" + run + " ";
        return line -> line.startsWith(prefix);
    }

    static String result(final Map<String, ?> values)
    {
        final StringBuilder line = new StringBuilder(RESULT);
        values.forEach((k, v) -> line.append(' ').append(k).append('=').append(v));
        return line.toString();
    }

    /**
     * @return the pairs of a {@link #RESULT} line.
     */
    static Map<String, String> parseResult(final String line)
    {
        final Map<String, String> values = new LinkedHashMap<>();
        for (final String pair : line.substring(RESULT.length()).trim().split("\\s+"))
        {
            final int eq = pair.indexOf('=');
            if (eq > 0)
            {
                values.put(pair.substring(0, eq), pair.substring(eq + 1));
            }
        }
        return values;
    }
}
