package io.mrd.cli;

import io.mrd.testing.ExternalTool;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code scripts/mrd.service} is a valid unit ({@code systemd-analyze verify}) whose sandboxing keeps the exposure
 * that {@code systemd-analyze security} rates at or below {@link #MAX_EXPOSURE}, the figure the README gives.
 * <p>
 * The unit names {@code /opt/mrd}; the test checks a copy that names this checkout instead, so that verify finds
 * the executables it points at.
 */
class SystemdUnitTest
{
    /** The highest overall exposure the unit may have (systemd's scale: 0 safest, 10 unsafe). */
    static final double MAX_EXPOSURE = 2.0;

    private static final Pattern OVERALL = Pattern.compile("Overall exposure level for \\S+: (\\d+\\.\\d)");

    @TempDir
    Path dir;

    @Test
    void verifiesCleanly() throws IOException
    {
        final ExternalTool systemdAnalyze = ExternalTool.require("systemd-analyze");
        final ExternalTool.Result result = systemdAnalyze.run("", "verify", unitForThisCheckout().toString());
        assertEquals(0, result.exitCode(), "systemd-analyze verify:\n" + result.output());
        assertEquals("", result.output().strip(), "systemd-analyze verify has findings");
    }

    @Test
    void sandboxingKeepsTheExposureLow() throws IOException
    {
        final ExternalTool systemdAnalyze = ExternalTool.require("systemd-analyze");
        final ExternalTool.Result result = systemdAnalyze.run("", "security", "--offline=true", "--no-pager",
            unitForThisCheckout().toString());
        final Matcher overall = OVERALL.matcher(result.output());
        assertTrue(overall.find(), "no overall exposure in:\n" + result.output());
        final double exposure = Double.parseDouble(overall.group(1));
        System.out.println("FIGURE systemd-analyze security exposure=" + exposure);
        assertTrue(exposure <= MAX_EXPOSURE, "exposure " + exposure + " > " + MAX_EXPOSURE + ":\n" + result.output());
        final String unit = Files.readString(ProjectRoot.path().resolve("scripts/mrd.service"));
        assertTrue(unit.contains("rates this unit " + exposure + " OK"),
            "scripts/mrd.service's comment must give the exposure systemd-analyze reports now, " + exposure);
    }

    /**
     * {@code systemctl reload} is {@code mrd restart} (ServiceManagerTest shows the protocol): it needs
     * {@code Type=notify} and {@code NotifyAccess=all}, and the new daemon must get the running one's options.
     */
    @Test
    void reloadIsARestartWithTheStartOptions() throws IOException
    {
        final String unit = Files.readString(ProjectRoot.path().resolve("scripts/mrd.service"));
        assertTrue(unit.contains("\nType=notify\n"), "Type=notify: the daemon tells systemd MAINPID= and READY=1");
        assertTrue(unit.contains("\nNotifyAccess=all\n"), "NotifyAccess=all: the reloaded daemon is not the one started");
        final String start = line(unit, "ExecStart=/opt/mrd/scripts/mrd start ");
        final String reload = line(unit, "ExecReload=/opt/mrd/scripts/mrd restart ");
        assertEquals(start.replace("--foreground ", ""), reload, "ExecReload repeats ExecStart's options");
    }

    /** @return what follows {@code prefix} on the one line that starts with it. */
    private static String line(final String unit, final String prefix)
    {
        final String[] found = unit.lines().filter(l -> l.startsWith(prefix)).map(l -> l.substring(prefix.length()))
            .toArray(String[]::new);
        assertEquals(1, found.length, "one line starting " + prefix);
        return found[0];
    }

    private Path unitForThisCheckout() throws IOException
    {
        final Path root = ProjectRoot.path();
        final String unit = Files.readString(root.resolve("scripts/mrd.service"), StandardCharsets.UTF_8)
            .replace("/opt/mrd", root.toString());
        final Path copy = dir.resolve("mrd.service");
        Files.writeString(copy, unit, StandardCharsets.UTF_8);
        return copy;
    }
}
