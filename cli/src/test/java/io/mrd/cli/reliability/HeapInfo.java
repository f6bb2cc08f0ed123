package io.mrd.cli.reliability;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

/**
 * The daemon's Java heap as {@code jcmd <pid> GC.heap_info} reports it: a figure for RELIABILITY.md, not an
 * assertion (the heap is bounded by -Xmx256m; an OOM ends the soak's daemon through -XX:+ExitOnOutOfMemoryError).
 */
final class HeapInfo
{
    private HeapInfo()
    {
    }

    /**
     * @return the generations' "total ..., used ..." of {@code GC.heap_info}, joined; or why there are none.
     */
    static String of(final long pid)
    {
        final Path jcmd = Path.of(System.getProperty("java.home"), "bin", "jcmd");
        if (!Files.isExecutable(jcmd))
        {
            return "(no jcmd in " + jcmd.getParent() + ")";
        }
        try
        {
            final Process process = new ProcessBuilder(jcmd.toString(), String.valueOf(pid), "GC.heap_info")
                .redirectErrorStream(true).start();
            final String out = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (!process.waitFor(30, TimeUnit.SECONDS))
            {
                process.destroyForcibly();
                return "(jcmd did not answer within 30 s)";
            }
            // "DefNew total 78656K, used 59720K [0x..." -> "DefNew total 78656K, used 59720K"
            return out.lines().filter(l -> l.contains(" total ") && l.contains("used"))
                .map(l -> (l.contains("[") ? l.substring(0, l.indexOf('[')) : l).trim().replaceAll("\\s+", " "))
                .collect(Collectors.joining("; "));
        }
        catch (final IOException ex)
        {
            return "(jcmd failed: " + ex.getMessage() + ")";
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            return "(interrupted)";
        }
    }
}
