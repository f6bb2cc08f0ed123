package io.mrd.primary.memory;

import io.mrd.testing.BaseAddresses;
import io.mrd.testing.TestDirs;
import io.mrd.layout.ControlFile;
import io.mrd.layout.ControlFileLayout;
import io.mrd.layout.HeaderDescriptor;
import io.mrd.testing.ChildJvm;
import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ThreadLocalRandom;

import static io.mrd.layout.sys.Sizes.hex;
import static io.mrd.primary.memory.MemoryFixture.SEGMENT;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The acceptance test: a second JVM maps a list at the daemon's address and sees the bytes the
 * daemon wrote (same VA, same file), and the daemon sees what it writes back.
 */
class CrossProcessMappingTest
{
    private static final long BASE = BaseAddresses.next();
    private static final int SEGMENTS = 8;

    @Test
    void aSecondProcessSeesTheDaemonsBytesAtTheSameAddress()
    {
        final Path dir = TestDirs.create("xproc");
        final ControlFileLayout layout = ControlFileLayout.compute(2, SEGMENTS, 16, 16, 4);
        try (ControlFile ctl = ControlFile.create(dir.resolve(ControlFile.FILE_NAME), layout, 4096))
        {
            ctl.header().magic(HeaderDescriptor.MAGIC).baseVirtaddr(BASE).segmentSize(SEGMENT);
            try (MemoryManager manager = new MemoryManager(new MemoryConfig(
                BASE, SEGMENT, 2, SEGMENTS, dir.resolve("mem"), Optional.empty(), ctl.buffer(), layout)))
            {
                ctl.header().publishLayoutVersion(HeaderDescriptor.LAYOUT_VERSION);

                manager.allocate(SEGMENT, 5);
                final Allocation a = manager.allocate(2 * SEGMENT, 1);
                final long nonce = ThreadLocalRandom.current().nextLong();
                for (int i = 0; i < a.segmentCount(); i++)
                {
                    final long address = a.address() + i * SEGMENT;
                    final MemorySegment segment = MemorySegment.ofAddress(address).reinterpret(SEGMENT);
                    segment.set(ValueLayout.JAVA_LONG, 0, address);
                    segment.set(ValueLayout.JAVA_LONG, 8, nonce ^ i);
                }
                final long token = ThreadLocalRandom.current().nextLong();

                try (ChildJvm child = ChildJvm.start("memseg-mapper", MemsegMapperMain.class,
                    List.of(ctl.path().toString(), Long.toHexString(token))))
                {
                    child.awaitLine("DONE"::equals, Duration.ofSeconds(30));
                    final List<String> lines = child.lines();
                    for (int i = 0; i < a.segmentCount(); i++)
                    {
                        final long address = a.address() + i * SEGMENT;
                        final String expected = "SEEN " + hex(address) + " " + Long.toHexString(address) + " " +
                            Long.toHexString(nonce ^ i);
                        assertTrue(lines.contains(expected), "expected '" + expected + "' in\n" + child.output());
                    }

                    final String childMaps = lines.stream().filter(l -> l.startsWith("MAPS ")).findFirst()
                        .orElseThrow().substring("MAPS ".length());
                    final String ownMaps = MemoryFixture.mapsLine(BASE);
                    final String backing = manager.list(0).backingPath().toString();
                    assertTrue(childMaps.endsWith(backing) && childMaps.contains("rw-s"), childMaps);
                    assertEquals(fileIdentity(ownMaps), fileIdentity(childMaps),
                        "same start, offset, device, inode and path in both processes:\n" + ownMaps + "\n" + childMaps);

                    assertEquals(0, child.awaitExit(Duration.ofSeconds(30)), child.output());
                    assertEquals(token, MemorySegment.ofAddress(BASE).reinterpret(24).get(ValueLayout.JAVA_LONG, 16),
                        "the daemon sees what the second process wrote");
                }
            }
        }
        finally
        {
            TestDirs.deleteTree(dir);
        }
    }

    /**
     * @return start, offset, device, inode and path of a /proc/self/maps line (the end may differ: the kernel
     * may or may not merge neighbouring mappings of the file into one area).
     */
    private static String fileIdentity(final String mapsLine)
    {
        final String[] fields = mapsLine.trim().split("\\s+");
        return fields[0].substring(0, fields[0].indexOf('-')) + " " + fields[2] + " " + fields[3] + " " +
            fields[4] + " " + fields[5];
    }
}
