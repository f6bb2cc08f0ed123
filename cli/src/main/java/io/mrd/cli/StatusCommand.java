package io.mrd.cli;

import io.mrd.layout.ControlFile;
import io.mrd.layout.RunDirectoryPath;
import io.mrd.layout.sys.Sizes;
import io.mrd.tools.DaemonSummary;
import io.mrd.tools.Format;
import io.mrd.tools.RunDirectoryReader;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;

import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;
import java.util.concurrent.Callable;

/**
 * {@code mrd status}: is the daemon alive? Reads the lock and the control file only.
 */
@Command(
    name = "status",
    mixinStandardHelpOptions = true,
    description = {
        "Tell whether a daemon is running.",
        "Exit 0 with pid, uptime, heartbeat age and memory in use when it is alive; exit 1 and 'not running' " +
            "(or 'not responding' when its heartbeat is stale) otherwise, or 1 and a one-line reason on stderr " +
            "when the directory is not one or this user may not read it (never 'not running' then); 2 for a wrong " +
            "command line."
    },
    footer = {"", "Example:", "  mrd status --dir /tmp/mrd && echo alive"})
public final class StatusCommand implements Callable<Integer>
{
    @Mixin
    DirOption dirOption;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    public Integer call()
    {
        final Path dir = dirOption.resolve();
        final PrintWriter out = spec.commandLine().getOut();
        final Optional<DaemonSummary> summary = RunDirectoryReader.readSummary(dir);
        if (!RunDirectoryReader.isLocked(dir))
        {
            // A dead daemon's descriptor holder removes its socket when it exits (released, or its grace is over).
            final boolean held = Files.exists(dir.resolve(RunDirectoryPath.HOLD_SOCKET_FILE));
            out.println("mrd not running in " + dir + summary
                .map(s -> " (stale files of pid " + s.pid() + " remain; " + (held ? "its descriptor holder keeps " +
                    "its registrations: the next 'mrd start' with the same settings adopts them)" :
                    "the next 'mrd start' recovers them)"))
                .orElse(""));
            return Mrd.EXIT_FAILURE;
        }
        if (summary.isEmpty())
        {
            out.println("mrd not running in " + dir +
                " (the lock is held but no control file is published: the daemon is starting or stuck)");
            return Mrd.EXIT_FAILURE;
        }
        final DaemonSummary s = summary.get();
        final String death = s.heartbeat().reason();
        if (death != null)
        {
            out.println("mrd not responding in " + dir + ": pid " + s.pid() + " " + death +
                ": check the process, or 'mrd stop' it");
            return Mrd.EXIT_FAILURE;
        }
        out.println("mrd running in " + dir);
        out.printf("  pid          %d%n", s.pid());
        out.printf("  epoch        %s%n", Sizes.hex(s.header().epoch()));
        out.printf("  uptime       %s%n", Format.duration(System.currentTimeMillis() - s.header().startTimeMs()));
        out.printf("  heartbeat    %d ms ago (stale after %d ms)%n", s.heartbeat().ageMs(),
            s.heartbeat().staleLimitMs());
        out.printf("  provider     %s%n", s.header().provider());
        out.printf("  memory       %s in use of %s%n", Sizes.format(s.bytesAllocated()), Sizes.format(s.capacity()));
        out.printf("  control file %s (%s)%n", dir.resolve(ControlFile.FILE_NAME),
            s.header().hugepageBacked() ? "hugetlbfs" : "tmpfs");
        return 0;
    }
}
