package io.mrd.bench.multi;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
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

    /**
     * What a child does with one command line, split into words.
     */
    @FunctionalInterface
    interface Commands
    {
        /**
         * @return false when the child does not know the command.
         */
        boolean obey(String[] words) throws Exception;
    }

    private Handshake()
    {
    }

    /**
     * The child's side: prints {@link #READY}, then obeys its standard input line by line, blocked in a read (no
     * CPU) between commands, until {@link #QUIT} or the end of input. A line it does not know is answered with
     * {@code unknown command: LINE}.
     */
    static void obey(final Commands commands) throws Exception
    {
        System.out.println(READY);
        System.out.flush();
        final BufferedReader input = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while (null != (line = input.readLine()) && !line.equals(QUIT))
        {
            if (!commands.obey(line.trim().split("\\s+")))
            {
                System.out.println("unknown command: " + line);
            }
        }
    }

    /**
     * Prints one {@link #RESULT} line and flushes it, for the orchestrator polling the child's log.
     */
    static void print(final Map<String, ?> values)
    {
        System.out.println(result(values));
        System.out.flush();
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
