package io.mrd.primary.mr;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrEntry;
import io.mrd.layout.MrdException;
import io.mrd.primary.memory.Allocation;
import io.mrd.primary.provider.FaultPoint;
import io.mrd.primary.provider.ProviderConfig;
import io.mrd.primary.provider.SharedDevice;
import io.mrd.testing.BaseAddresses;
import io.mrd.testing.EmulatedDevice;
import io.mrd.testing.EmulatorSettings;
import io.mrd.testing.LiveObjects;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The multi-device rule of a registration (docs/multi-device.md): a failure on any device, at any step, of any
 * chunk, leaves nothing of that chunk pinned, registered on any device or cached, and leaves the chunks
 * registered before it as they were. The engine runs over the ibverbs provider on 4 emulated devices
 * ({@code --device all}), one MR per segment ({@code --no-mr-ext-memseg}), so an allocation of 4 segments is 4
 * chunks registered one after the other; a fault is injected at each of the 52 points (4 chunks × (populate,
 * once for all devices, + 4 devices × register, registered, publish)), each in an engine of its own, and after
 * each the test compares the process's VmLck, mrd's pinned bytes, every device's live MR count (the emulated
 * device's own count, {@code mrdemu_live_objects}) and the global cache with what they were before the chunk.
 */
final class MultiDeviceFaultTest
{
    private static final long BASE = BaseAddresses.next();
    private static final int DEVICES = 4;
    private static final int CHUNKS = 4;

    private static Path emulator;

    @BeforeAll
    static void fourDevices()
    {
        emulator = EmulatedDevice.library();
        EmulatorSettings.devices(DEVICES);
    }

    @AfterAll
    static void oneDevice()
    {
        EmulatorSettings.reset();
    }

    /** What must come back after a failed chunk. */
    private record State(long vmLckKib, long pinnedBytes, List<Integer> mrsPerDevice, List<String> cache)
    {
    }

    @Test
    void aFaultAnywhereUndoesTheChunkOnEveryDevice()
    {
        final List<FaultPoint> points = new ArrayList<>();
        for (int chunk = 1; chunk <= CHUNKS; chunk++)
        {
            points.add(new FaultPoint(0, chunk, FaultPoint.Step.POPULATE));
            for (final FaultPoint.Step step : List.of(
                FaultPoint.Step.REGISTER, FaultPoint.Step.REGISTERED, FaultPoint.Step.PUBLISH))
            {
                for (int device = 0; device < DEVICES; device++)
                {
                    points.add(new FaultPoint(device, chunk, step));
                }
            }
        }
        assertEquals(52, points.size());
        for (final FaultPoint point : points)
        {
            injectAndCheck(point);
        }
    }

    private void injectAndCheck(final FaultPoint point)
    {
        final ProviderConfig provider = ProviderConfig.ibverbs().withLibraryPath(emulator)
            .withDeviceName(ProviderConfig.ALL_DEVICES).withFaultPoint(point);
        try (EngineFixture f = new EngineFixture(EngineOptions.at(BASE).extend(false).provider(provider)))
        {
            assertEquals(DEVICES, f.registrar.sharedDevices().size(), "devices opened by --device all");
            final State empty = state(f);
            final Allocation allocation = f.engine.allocate(CHUNKS * f.segmentSize(), 1);
            for (int chunk = 1; chunk <= CHUNKS; chunk++)
            {
                final long address = allocation.address() + (chunk - 1) * f.segmentSize();
                final State before = state(f);
                if (chunk != point.registration())
                {
                    f.engine.createMr(address, 1);
                    continue;
                }
                final MrdException ex = assertThrows(MrdException.class, () -> f.engine.createMr(address, 1),
                    point + " let the chunk register");
                assertEquals(ErrorCode.ENOMEM, ex.code(), ex.oneLine());
                assertTrue(ex.getMessage().contains("injected failure at " + point.step() + " of registration #" +
                    point.registration() + " on device " + point.device()), ex.oneLine());
                assertEquals(before, state(f), "after the fault at " + point);
                assertNull(f.secondaryLookup(address), "a secondary finds the failed chunk after " + point);
                f.checkInvariants();
            }
            final State registered = state(f);
            assertEquals(CHUNKS - 1, registered.cache().size(), "chunks cached after " + point);
            for (int device = 0; device < DEVICES; device++)
            {
                assertEquals(CHUNKS - 1, registered.mrsPerDevice().get(device), "MRs of device " + device +
                    " after " + point);
            }
            f.engine.freeMemory(allocation.address(), allocation.length(), 1);
            assertEquals(empty, state(f), "after freeing the allocation of " + point);
        }
    }

    private static State state(final EngineFixture f)
    {
        final List<Integer> mrs = new ArrayList<>();
        for (final SharedDevice device : f.registrar.sharedDevices())
        {
            mrs.add(LiveObjects.of(emulator, device.context()).mrs());
        }
        return new State(vmLckKib(), f.registrar.pinnedBytes(), mrs,
            f.cacheEntries().stream().map(MrEntry::toString).toList());
    }

    private static long vmLckKib()
    {
        try
        {
            return Files.readAllLines(Path.of("/proc/self/status")).stream()
                .filter(line -> line.startsWith("VmLck:"))
                .mapToLong(line -> Long.parseLong(line.replaceAll("[^0-9]", "")))
                .findFirst().orElseThrow();
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException(ex);
        }
    }
}
