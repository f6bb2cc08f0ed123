package io.mrd.cli.reliability;

import io.mrd.cli.Mrd;
import io.mrd.cli.fixture.DaemonExtension;
import io.mrd.cli.fixture.LiveDaemon;
import io.mrd.cli.fixture.MrdRunner;
import io.mrd.layout.MemsegListDescriptor;
import io.mrd.layout.MrDescriptor;
import io.mrd.layout.journal.JournalEvent;
import io.mrd.layout.journal.JournalEventType;
import io.mrd.layout.journal.JournalFileDescriptor;
import io.mrd.testing.ChildJvm;
import io.mrd.testing.Wait;
import io.mrd.tools.ControlFileSnapshot;
import io.mrd.tools.JournalReader;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The journal of a daemon killed with {@code kill -9} in the middle of two clients' ALLOC, CREATE_MR and FREE:
 * {@code mrd events} reads it to its end, and that end agrees with the last control-file state (replayed slot by
 * slot, the MR events are a consistent history that leaves every MR slot as the control file shows it, range,
 * lkey and owner included, or one step ahead of it for the steps in flight at the kill; every allocated segment
 * lies in an ALLOC of its owner, and journal and control file disagree on at most the one request per client in
 * flight at the kill). {@code mrd
 * start} on the directory keeps the old journal, which {@code mrd events --previous} still reads.
 */
final class JournalAfterKillTest
{
    static final Duration WAIT = Duration.ofSeconds(60);
    private static final int CLIENTS = 2;

    @RegisterExtension
    final DaemonExtension daemons = new DaemonExtension();

    /** The run directory of this test's daemons. */
    private final Path dir = daemons.newDirectory("journal-kill");

    @Test
    void theJournalOfAKilledDaemonEndsWithItsLastControlFileState() throws Exception
    {
        final List<ChildJvm> workers = new ArrayList<>();
        final ControlFileSnapshot last;
        try (LiveDaemon daemon = daemons.launch("journal-kill").in(dir).start("--max-memory", "256MiB"))
        {
            for (int i = 0; i < CLIENTS; i++)
            {
                workers.add(ChildJvm.start("worker-" + i, Mrd.class.getName(), List.of("worker", "--dir",
                    dir.toString(), "--alloc", "32MiB", "--threads", "1", "--lookups", "1000000000", "--free-every",
                    "500", "--warmup", "0", "--seed", Integer.toString(i + 1)), Map.of(), List.of()));
            }
            final Path journal = dir.resolve(JournalFileDescriptor.DIRECTORY);
            // Long enough that MR slots have been deregistered and reused: the replay below then sees every
            // step of an MR's life, several times over.
            Wait.await("both clients freeing and creating MRs, MRs deregistered", WAIT, () -> count(journal,
                JournalEventType.FREE) >= 2 * CLIENTS && count(journal, JournalEventType.MR_CREATED) >= 8 * CLIENTS &&
                count(journal, JournalEventType.MR_DEREGISTERED) >= 4 * CLIENTS);
            assertEquals(137, daemon.kill(), "killed by SIGKILL");
            last = daemon.snapshot();
        }
        finally
        {
            workers.forEach(ChildJvm::close);
        }

        final List<JournalEvent> events = read(dir.resolve(JournalFileDescriptor.DIRECTORY));
        assertEquals(JournalEventType.DAEMON_STARTED, events.getFirst().type());
        assertEquals(last.header().epoch(), events.getFirst().value(), "the journal is this daemon's");
        assertTrue(events.stream().noneMatch(e -> e.type() == JournalEventType.DAEMON_STOPPED));
        final MrdRunner.Result printed = MrdRunner.mrd("events", "--dir", dir.toString());
        assertEquals(0, printed.exit(), printed::toString);
        assertEquals(events.size(), printed.out().lines().count(), "one line per event");

        // MRs: the journal, replayed slot by slot, is a consistent history (each MR created in a free slot,
        // detached while active, deregistered once detached, with the same range and keys throughout) and ends
        // where the control file ends, but for the steps in flight at the kill: the journal records each step
        // before the control file shows it, so it may be one step ahead of a slot, never behind or two ahead.
        final Map<Integer, JournalEvent> lastOfSlot = new HashMap<>();
        for (final JournalEvent e : events)
        {
            if (e.type() != JournalEventType.MR_CREATED && e.type() != JournalEventType.MR_DETACHED &&
                e.type() != JournalEventType.MR_DEREGISTERED)
            {
                continue;
            }
            final JournalEvent before = lastOfSlot.put(e.arg(), e);
            final JournalEventType expected = switch (e.type())
            {
                case MR_CREATED -> JournalEventType.MR_DEREGISTERED;
                case MR_DETACHED -> JournalEventType.MR_CREATED;
                default -> JournalEventType.MR_DETACHED;
            };
            if (null == before)
            {
                assertEquals(JournalEventType.MR_CREATED, e.type(), "the first event of MR slot " + e.arg() + ": " + e);
                continue;
            }
            assertEquals(expected, before.type(), "MR slot " + e.arg() + ": " + e + " after " + before);
            if (e.type() != JournalEventType.MR_CREATED)
            {
                assertEquals(List.of(before.address(), before.length(), before.lkey(), before.client()),
                    List.of(e.address(), e.length(), e.lkey(), e.client()), "MR slot " + e.arg() + "'s range, " +
                    "lkey and owner from " + before + " to " + e);
            }
        }
        final Map<Integer, ControlFileSnapshot.Mr> inControlFile = new HashMap<>();
        last.mrs().forEach(mr -> inControlFile.put(mr.index(), mr));
        int active = 0;
        int createsAhead = 0;
        final Set<Integer> slots = new TreeSet<>(lastOfSlot.keySet());
        slots.addAll(inControlFile.keySet());
        for (final int slot : slots)
        {
            final ControlFileSnapshot.Mr mr = inControlFile.get(slot);
            final int state = null == mr ? MrDescriptor.STATE_FREE : mr.state();
            final JournalEvent e = lastOfSlot.get(slot);
            final int replayed = null == e ? MrDescriptor.STATE_FREE : switch (e.type())
            {
                case MR_CREATED -> MrDescriptor.STATE_ACTIVE;
                case MR_DETACHED -> MrDescriptor.STATE_DETACHED;
                default -> MrDescriptor.STATE_FREE;
            };
            active += state == MrDescriptor.STATE_ACTIVE ? 1 : 0;
            final String what = "MR slot " + slot + ": the control file says " + MrDescriptor.stateName(state) +
                ", the journal " + MrDescriptor.stateName(replayed) + " (its last event: " + e + ")";
            if (state == replayed)
            {
                if (null != mr)
                {
                    assertEquals(List.of(mr.start(), mr.end() - mr.start(), mr.lkey(), mr.owner()),
                        List.of(e.address(), e.length(), e.lkey(), e.client()), what + ": range, lkey, owner");
                }
                continue;
            }
            final boolean oneStepAhead = state == MrDescriptor.STATE_FREE && replayed == MrDescriptor.STATE_ACTIVE ||
                state == MrDescriptor.STATE_ACTIVE && replayed == MrDescriptor.STATE_DETACHED ||
                state == MrDescriptor.STATE_DETACHED && replayed == MrDescriptor.STATE_FREE;
            assertTrue(oneStepAhead, what + ": not a step in flight at the kill");
            createsAhead += state == MrDescriptor.STATE_FREE ? 1 : 0;
        }
        assertTrue(active > 0, "the kill found MRs");
        // A client's worker thread has one CREATE_MR in flight at most.
        assertTrue(createsAhead <= CLIENTS, createsAhead + " MRs journaled as created that the control file " +
            "does not show");

        // Segments: each one the control file shows allocated was ALLOCated to its owner; the last ALLOC or FREE
        // of a segment agrees with the control file but for the requests in flight at the kill.
        final Map<Long, JournalEvent> lastOfSegment = new HashMap<>();
        final long segment = last.lists().getFirst().segmentSize();
        for (final JournalEvent e : events)
        {
            if (e.type() == JournalEventType.ALLOC || e.type() == JournalEventType.FREE)
            {
                for (long a = e.address(); a < e.address() + e.length(); a += segment)
                {
                    lastOfSegment.put(a, e);
                }
            }
        }
        int disagreements = 0;
        int allocated = 0;
        for (final ControlFileSnapshot.MemsegList list : last.lists())
        {
            for (int s = 0; s < list.segmentCount(); s++)
            {
                final int owner = list.owners()[s];
                final JournalEvent e = lastOfSegment.get(list.segmentAddress(s));
                if (owner != MemsegListDescriptor.OWNER_FREE)
                {
                    allocated++;
                    assertNotNull(e, "segment " + s + " of list " + list.index() + " allocated with no ALLOC");
                    assertEquals(owner, e.client(), "owner of segment " + s);
                }
                final boolean journalSaysAllocated = null != e && e.type() == JournalEventType.ALLOC;
                if (journalSaysAllocated != (owner != MemsegListDescriptor.OWNER_FREE))
                {
                    disagreements++;
                }
            }
        }
        assertTrue(allocated > 0, "the kill found memory allocated");
        // One request in flight per client: a FREE or an ALLOC of one part, 32MiB / 8 = two segments.
        assertTrue(disagreements <= CLIENTS * 2, disagreements + " segments disagree");

        // mrd start keeps the killed daemon's journal, and mrd events --previous still reads it.
        final MrdRunner.Result start = MrdRunner.mrd("start", "--dir", dir.toString(), "--huge-dir", "none",
            "--max-memory", "256MiB");
        assertEquals(0, start.exit(), start::toString);
        try
        {
            final MrdRunner.Result previous = MrdRunner.mrd("events", "--dir", dir.toString(), "--previous");
            assertEquals(0, previous.exit(), previous::toString);
            assertEquals(printed.out(), previous.out(), "the old journal, unchanged");
            final List<JournalEvent> fresh = read(dir.resolve(JournalFileDescriptor.DIRECTORY));
            assertEquals(JournalEventType.DAEMON_STARTED, fresh.getFirst().type());
            assertTrue(fresh.getFirst().value() != last.header().epoch(), "a new daemon's journal");
        }
        finally
        {
            assertEquals(0, MrdRunner.mrd("stop", "--dir", dir.toString()).exit());
        }
        assertTrue(Files.isDirectory(dir.resolve(JournalFileDescriptor.PREVIOUS_DIRECTORY)));
    }

    private static long count(final Path journal, final JournalEventType type)
    {
        if (!Files.exists(journal.resolve(JournalFileDescriptor.fileName(0))))
        {
            return 0;
        }
        return read(journal).stream().filter(e -> e.type() == type).count();
    }

    private static List<JournalEvent> read(final Path journal)
    {
        final List<JournalEvent> events = new ArrayList<>();
        try (JournalReader reader = JournalReader.open(journal))
        {
            reader.poll(events::add);
        }
        return events;
    }
}
