package io.mrd.primary.mr;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrDescriptor;
import io.mrd.layout.MrEntry;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Sizes;
import io.mrd.primary.memory.Allocation;
import io.mrd.primary.provider.ProviderConfig;
import io.mrd.testing.BaseAddresses;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;

import static io.mrd.layout.sys.Sizes.hex;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Registrations that fail (an injected failure, the pin limit, a full MR table) reply a clear error and leave
 * nothing behind: no MR record, no cache entry, no pinned byte, and the slot they took is free again.
 */
class ProviderFailureTest
{
    private static final long BASE = BaseAddresses.next();
    private static final long SEG = EngineFixture.SEGMENT;

    /**
     * Three allocations of two segments, separated by freed segments so that each is its own chunk.
     */
    private static List<Allocation> threeChunks(final EngineFixture f)
    {
        final List<Allocation> chunks = new ArrayList<>();
        final List<Allocation> gaps = new ArrayList<>();
        for (int i = 0; i < 3; i++)
        {
            chunks.add(f.engine.allocate(2 * SEG, 1));
            gaps.add(f.engine.allocate(SEG, 2));
        }
        for (final Allocation gap : gaps)
        {
            f.engine.freeMemory(gap.address(), gap.length(), gap.owner());
        }
        return chunks;
    }

    @Test
    void theNthRegistrationFailsCleanlyAndTheNextOneSucceeds()
    {
        try (EngineFixture f = new EngineFixture(EngineOptions.at(BASE)
            .provider(ProviderConfig.defaults().withFailNth(2))))
        {
            final List<Allocation> chunks = threeChunks(f);
            final MrEntry first = f.engine.createMr(chunks.get(0).address(), 1);
            assertEquals(0, first.mr);
            f.checkInvariants();

            final byte[] before = f.tables();
            final long pinned = f.registrar.pinnedBytes();
            final long enomem = f.counter(MrdCounter.CREATE_ERRORS_ENOMEM);
            final long address = chunks.get(1).address() + 12345;
            final MrdException ex = assertThrows(MrdException.class, () -> f.engine.createMr(address, 1));
            assertEquals(ErrorCode.ENOMEM, ex.code(), ex.oneLine());
            assertTrue(ex.getMessage().contains("injected failure of registration #2"), ex.oneLine());
            assertTrue(ex.getMessage().contains("--fail-nth"), ex.oneLine());
            f.assertTablesUnchanged(before, "a failed registration");
            assertEquals(pinned, f.registrar.pinnedBytes(), "pinned bytes after a failed registration");
            assertEquals(enomem + 1, f.counter(MrdCounter.CREATE_ERRORS_ENOMEM));
            assertEquals(1, f.activeMrs().size());
            assertEquals(MrDescriptor.STATE_FREE, f.state(1), "the slot the failed create took");
            assertNull(f.secondaryLookup(address));
            f.checkInvariants();

            // The same address again (registration #3), then the third chunk (#4): both succeed, the first in the
            // slot the failure released.
            final MrEntry retry = f.engine.createMr(address, 1);
            assertEquals(1, retry.mr, "the failed create's slot is reused");
            assertEquals(chunks.get(1).address(), retry.start);
            assertEquals(chunks.get(1).end(), retry.end);
            final MrEntry third = f.engine.createMr(chunks.get(2).address(), 1);
            assertEquals(2, third.mr);
            f.checkInvariants();
            assertEquals(3, f.activeMrs().size());
            assertEquals(retry.lkey, f.secondaryLookup(address));
            assertEquals(first.lkey, f.secondaryLookup(chunks.get(0).address()));
            assertEquals(3 * 2 * SEG, f.registrar.pinnedBytes());
        }
    }

    @Test
    void aChunkOverTheMaxPinnedLimitFailsWithENOMEMNamingTheLimit()
    {
        try (EngineFixture f = new EngineFixture(EngineOptions.at(BASE)
            .provider(ProviderConfig.defaults().withMaxPinned(8 * Sizes.MIB))))
        {
            final Allocation a = f.engine.allocate(6 * SEG, 1);
            final byte[] before = f.tables();
            final MrdException ex = assertThrows(MrdException.class, () -> f.engine.createMr(a.address() + SEG, 1));
            assertEquals(ErrorCode.ENOMEM, ex.code(), ex.oneLine());
            assertTrue(ex.getMessage().contains("--max-pinned"), ex.oneLine());
            assertTrue(ex.getMessage().contains("8MiB"), ex.oneLine());
            assertTrue(ex.getMessage().contains("12MiB"), "the message names what was asked: " + ex.oneLine());
            f.assertTablesUnchanged(before, "a registration over --max-pinned");
            assertEquals(0, f.registrar.pinnedBytes());
            assertEquals(0, f.counter(MrdCounter.BYTES_PINNED));
            assertEquals(1, f.counter(MrdCounter.CREATE_ERRORS_ENOMEM));
            assertNull(f.secondaryLookup(a.address() + SEG));
            f.checkInvariants();
        }
    }

    @Test
    void singleSegmentsRegisterUntilTheMaxPinnedLimit()
    {
        try (EngineFixture f = new EngineFixture(EngineOptions.at(BASE).extend(false)
            .provider(ProviderConfig.defaults().withMaxPinned(8 * Sizes.MIB))))
        {
            final Allocation a = f.engine.allocate(6 * SEG, 1);
            for (int i = 0; i < 4; i++)
            {
                final MrEntry entry = f.engine.createMr(a.address() + i * SEG, 1);
                assertEquals(a.address() + i * SEG, entry.start);
                assertEquals(a.address() + (i + 1) * SEG, entry.end);
            }
            assertEquals(8 * Sizes.MIB, f.registrar.pinnedBytes());
            f.checkInvariants();

            final byte[] before = f.tables();
            final MrdException ex = assertThrows(MrdException.class, () -> f.engine.createMr(a.address() + 4 * SEG, 1));
            assertEquals(ErrorCode.ENOMEM, ex.code(), ex.oneLine());
            assertTrue(ex.getMessage().contains("--max-pinned 8MiB"), ex.oneLine());
            f.assertTablesUnchanged(before, "a registration over --max-pinned");
            assertEquals(8 * Sizes.MIB, f.registrar.pinnedBytes());
            f.checkInvariants();

            // Freeing a registered segment unpins it, and the segment that did not fit fits now.
            f.engine.freeMemory(a.address(), SEG, 1);
            assertEquals(6 * Sizes.MIB, f.registrar.pinnedBytes());
            final MrEntry entry = f.engine.createMr(a.address() + 4 * SEG, 1);
            assertEquals(entry.lkey, f.secondaryLookup(a.address() + 4 * SEG));
            assertEquals(8 * Sizes.MIB, f.registrar.pinnedBytes());
            f.checkInvariants();
        }
    }

    @Test
    void aFullMrTableFailsWithENOMEMNamingMaxMrs()
    {
        try (EngineFixture f = new EngineFixture(EngineOptions.at(BASE).extend(false).mrCapacity(4)))
        {
            final Allocation a = f.engine.allocate(6 * SEG, 1);
            for (int i = 0; i < 4; i++)
            {
                f.engine.createMr(a.address() + i * SEG, 1);
            }
            f.checkInvariants();
            final byte[] before = f.tables();
            final long pinned = f.registrar.pinnedBytes();
            final MrdException ex = assertThrows(MrdException.class, () -> f.engine.createMr(a.address() + 4 * SEG, 1));
            assertEquals(ErrorCode.ENOMEM, ex.code(), ex.oneLine());
            assertTrue(ex.getMessage().contains("--max-mrs"), ex.oneLine());
            assertTrue(ex.getMessage().contains(hex(a.address() + 4 * SEG)), "names the address: " + ex.oneLine());
            f.assertTablesUnchanged(before, "a create with the MR table full");
            assertEquals(pinned, f.registrar.pinnedBytes());
            assertEquals(1, f.counter(MrdCounter.CREATE_ERRORS_ENOMEM));

            // Freeing one MR's memory frees its slot.
            f.engine.freeMemory(a.address(), SEG, 1);
            final MrEntry entry = f.engine.createMr(a.address() + 4 * SEG, 1);
            assertEquals(0, entry.mr, "the collected MR's slot");
            f.checkInvariants();
        }
    }

    /**
     * N secondaries that miss on the same buffer at once all send CREATE_MR; when the table is full, the ones
     * that come after the first must still get the MR it created, not ENOMEM (DESIGN §5 step 5).
     */
    @Test
    void aCreateForAnAddressRegisteredAlreadySucceedsWhileTheTableIsFull()
    {
        try (EngineFixture f = new EngineFixture(EngineOptions.at(BASE).extend(false).mrCapacity(4)))
        {
            final Allocation a = f.engine.allocate(4 * SEG, 1);
            final int[] lkeys = new int[4];
            for (int i = 0; i < 4; i++)
            {
                lkeys[i] = f.engine.createMr(a.address() + i * SEG, 1).lkey;
            }
            final byte[] before = f.tables();
            for (int i = 0; i < 4; i++)
            {
                final long address = a.address() + i * SEG + 4096;
                final MrEntry entry = f.engine.createMr(address, 1);
                assertEquals(lkeys[i], entry.lkey, "create for registered " + hex(address) + " with a full table");
                assertTrue(entry.containsRange(address, 1));
            }
            f.assertTablesUnchanged(before, "creates for registered addresses");
            assertEquals(0, f.counter(MrdCounter.CREATE_ERRORS_ENOMEM));
            f.checkInvariants();
        }
    }
}
