package io.mrd.cli.reliability;

import io.mrd.cli.fixture.DaemonExtension;
import io.mrd.cli.fixture.LiveDaemon;
import io.mrd.layout.ControlFileLayout;
import io.mrd.layout.MemsegListDescriptor;
import io.mrd.layout.MemsegListRecord;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.sys.Sizes;
import io.mrd.primary.memory.Allocation;
import io.mrd.primary.memory.FreedRange;
import io.mrd.primary.memory.MemoryConfig;
import io.mrd.primary.memory.MemoryManager;
import io.mrd.testing.BaseAddresses;
import io.mrd.testing.ChildJvm;
import io.mrd.testing.Wait;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The two bugs the soak found, each pinned down by a test that fails without its fix (RELIABILITY.md):
 * <ol>
 *   <li>{@code MrdClient.free} and {@code deregisterExternal} unmapped and forgot the memory only after the
 *       daemon had freed it, by which time another thread of the same client could have been given the same
 *       address and mapped it: that thread then faulted (SIGSEGV) or had its own free refused (EINVAL);</li>
 *   <li>{@code MemsegList} published a segment count without the segments being released, while the control
 *       file still showed those segments with their owner: {@code mrd check} reported "allocatedSegments says
 *       N but N+k segments have an owner" whenever an allocation landed during a slow free.</li>
 * </ol>
 */
final class SoakRegressionTest
{
    private static final long SEGMENT = 2 * Sizes.MIB;

    @RegisterExtension
    final DaemonExtension daemons = new DaemonExtension();

    /** The run directory of this test's daemons. */
    private final Path dir = daemons.newDirectory("soak-regression");

    @Test
    void threadsOfOneClientRecyclingTheSameAddressesNeverLoseTheirMappings()
    {
        try (LiveDaemon daemon = daemons.launch("soak-regression").in(dir).start("--max-memory", "64MiB");
            ChildJvm recycler = ChildJvm.start("recycler", ReliabilitySecondary.class.getName(),
                List.of("recycle", dir.toString(), "recycler", "4", "8"), Map.of(),
                List.of("-XX:ErrorFile=" + dir.resolve("hs_err_pid%p.log"), "-XX:-CreateCoredumpOnCrash")))
        {
            final int exit = recycler.awaitExit(Duration.ofSeconds(120));
            final String line = recycler.lines().stream().filter(l -> l.startsWith("recycled ")).findFirst()
                .orElse("(no result line)");
            assertEquals(0, exit, () -> line + "\n" + recycler.output());
            Wait.await("the recycler's memory released", Duration.ofSeconds(30),
                () -> daemon.counters(MrdCounter.BYTES_ALLOCATED, MrdCounter.CLIENTS_CONNECTED), LiveDaemon::allZero);
            daemon.assertHealthy("after the recycler");
            System.out.println("FIGURE regression recycle 4 threads x 8 s: " + line);
        }
    }

    @Test
    void anAllocationDuringAFreePublishesASegmentCountThatMatchesTheOwnersShown()
    {
        final ControlFileLayout layout = ControlFileLayout.compute(1, 16, 16, 16, 4);
        final UnsafeBuffer control = new UnsafeBuffer(new byte[(int)layout.fileLength()]);
        final MemsegListRecord record = new MemsegListRecord();
        // This test maps a memory manager's lists in the test JVM: at an address of its own.
        final MemoryManager manager = new MemoryManager(new MemoryConfig(
            BaseAddresses.next(), SEGMENT, 1, 16, dir.resolve("mem"), Optional.empty(), control, layout));
        try
        {
            record.wrap(control, layout.memsegListOffset(0));
            final Allocation first = manager.allocate(3 * SEGMENT, 1);
            // the free's first step: the segments are releasing, still shown with their owner
            final FreedRange range = manager.free(first.address(), first.length(), 1);
            assertEquals(owned(record), record.allocatedSegments(), "during the free");
            // another client allocates before the free has finished releasing
            manager.allocate(2 * SEGMENT, 2);
            assertEquals(owned(record), record.allocatedSegments(), "an allocation during the free");
            manager.release(range);
            assertEquals(owned(record), record.allocatedSegments(), "after the free");
            assertEquals(2, record.allocatedSegments());
        }
        finally
        {
            manager.close();
        }
    }

    private static int owned(final MemsegListRecord record)
    {
        int owned = 0;
        for (int s = 0; s < record.segmentCount(); s++)
        {
            owned += record.owner(s) == MemsegListDescriptor.OWNER_FREE ? 0 : 1;
        }
        return owned;
    }
}
