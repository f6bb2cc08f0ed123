package io.mrd.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * {@code promtool check metrics}: Prometheus' own lint of an exposition (metric names in base units, counters
 * ending in {@code _total}, HELP and TYPE lines). Skipped where promtool is not installed (see
 * {@link ExternalTool}).
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
}
