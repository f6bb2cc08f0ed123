package io.mrd.cli;

import io.mrd.layout.ControlFile;
import io.mrd.tools.ControlFileSnapshot;
import io.mrd.tools.Format;
import io.mrd.tools.Invariants;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;

import java.io.PrintWriter;
import java.util.List;
import java.util.concurrent.Callable;

/**
 * {@code mrd check}: validates the control file from outside, with {@link Invariants}.
 */
@Command(
    name = "check",
    mixinStandardHelpOptions = true,
    description = {
        "Validate the control file's invariants; exit 1 listing each violation.",
        "",
        "Checks the MR table and the global cache on a consistent snapshot of the",
        "control file (read under the seqlock; nothing is sent to the daemon): the",
        "cache sorted and non-overlapping, each entry a live chunk of exactly one",
        "ACTIVE MR with its lkey, every chunk cached unless overflowed; no segment",
        "live in two MRs; every live segment allocated; MR fields coherent (msN =",
        "bits set, bitmap inside its list, external MRs without a list); counters",
        "against the tables; unique client ids; every MR's keys on every device",
        "(each device's row filled and unique on its device, device 0's as in the",
        "record, FREE records' rows empty). A violation is reported only when",
        "two later snapshots show it too, so a daemon at work is not blamed for a",
        "state it was passing through."
    },
    footer = {
        "",
        "Examples:",
        "  mrd check --dir /tmp/mrd              the running daemon's control file",
        "  cp /tmp/mrd/mrd.ctl /tmp/saved.ctl && mrd check --file /tmp/saved.ctl",
        "",
        "Exit codes: 0 consistent, 1 violations (one per line) or no readable",
        "control file, 2 bad command line."
    })
public final class CheckCommand implements Callable<Integer>
{
    @Mixin
    ControlFileOption controlFileOption;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    public Integer call()
    {
        final PrintWriter out = spec.commandLine().getOut();
        try (ControlFile ctl = controlFileOption.open())
        {
            final List<String> violations = Invariants.check(ctl);
            if (!violations.isEmpty())
            {
                out.println("inconsistent: " + Format.plural(violations.size(), "violation") + " in " + ctl.path());
                violations.forEach(v -> out.println("  " + v));
                out.flush();
                return Mrd.EXIT_FAILURE;
            }
            out.println(summary(ControlFileSnapshot.read(ctl)));
            out.flush();
            return 0;
        }
    }

    static String summary(final ControlFileSnapshot s)
    {
        final long active = s.mrs().stream().filter(ControlFileSnapshot.Mr::active).count();
        final int allocated = s.lists().stream().mapToInt(ControlFileSnapshot.MemsegList::allocatedSegments).sum();
        final int chunks = s.mrs().stream().filter(ControlFileSnapshot.Mr::active).mapToInt(mr -> mr.chunks().size()).sum();
        return "consistent: " + s.mrs().size() + " MRs (" + active + " ACTIVE, " + (s.mrs().size() - active) +
            " DETACHED, " + chunks + " live chunks), " + s.cache().entries().size() + " cache entries" +
            (s.cache().overflow() ? " (overflow)" : "") + ", " + allocated + " segments allocated in " +
            Format.plural(s.lists().size(), "list") + ", " + Format.plural(s.clients().size(), "client") +
            ", devGen " + s.header().devGen() +
            (s.devices().several() ? ", keys on " + s.devices().devices().size() + " devices" : "");
    }
}
