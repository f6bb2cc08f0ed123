package io.mrd.primary.mr;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrEntry;
import io.mrd.layout.MrdException;
import io.mrd.primary.memory.Allocation;
import io.mrd.testing.BaseAddresses;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A chunk longer than the provider's {@code maxRegionLength} (the device's max_mr_size) becomes several MRs,
 * each at most that long in whole segments; a limit below one segment, and an ALLOC with registration longer
 * than the limit, are refused with messages that name it.
 */
class MaxRegionLengthTest
{
    private static final long BASE = BaseAddresses.next();
    private static final long SEG = EngineFixture.SEGMENT;

    @Test
    void aChunkLongerThanTheLimitIsRegisteredPieceByPiece()
    {
        try (EngineFixture f = new EngineFixture(EngineOptions.at(BASE)))
        {
            // 3.5 segments: rounded down to 3.
            f.registrar.maxRegionLength = 3 * SEG + SEG / 2;
            final Allocation a = f.engine.allocate(8 * SEG, 1);

            final MrEntry first = f.engine.createMr(a.address() + SEG, 1);
            assertEquals(a.address() + SEG, first.start, "the window starts at the address's segment");
            assertEquals(a.address() + 4 * SEG, first.end);
            f.checkInvariants();

            // Below it: what is left before the first piece.
            final MrEntry below = f.engine.createMr(a.address(), 1);
            assertEquals(a.address(), below.start);
            assertEquals(a.address() + SEG, below.end);

            // Near the end the window is moved back to stay whole: segments 4 to 7, the last three of them.
            final MrEntry last = f.engine.createMr(a.address() + 7 * SEG, 1);
            assertEquals(a.address() + 5 * SEG, last.start);
            assertEquals(a.address() + 8 * SEG, last.end);
            final MrEntry middle = f.engine.createMr(a.address() + 4 * SEG, 1);
            assertEquals(a.address() + 4 * SEG, middle.start);
            assertEquals(a.address() + 5 * SEG, middle.end);
            f.checkInvariants();
            assertEquals(4, f.activeMrs().size());
            for (final RecordedMr mr : f.activeMrs())
            {
                assertTrue(mr.length() <= 3 * SEG, "MR longer than the limit: " + mr);
            }
            f.engine.freeMemory(a.address(), a.length(), 1);
            assertEquals(0, f.registrar.pinnedBytes());
            f.checkInvariants();
        }
    }

    @Test
    void aLimitBelowOneSegmentIsRefusedNamingMaxMrSizeAndTheSegment()
    {
        try (EngineFixture f = new EngineFixture(EngineOptions.at(BASE)))
        {
            f.registrar.maxRegionLength = SEG - 4096;
            final Allocation a = f.engine.allocate(SEG, 1);
            final byte[] before = f.tables();
            final MrdException ex = assertThrows(MrdException.class, () -> f.engine.createMr(a.address(), 1));
            assertEquals(ErrorCode.EINVAL, ex.code(), ex.oneLine());
            assertTrue(ex.getMessage().contains("max_mr_size " + (SEG - 4096)) && ex.getMessage().contains("2MiB"),
                ex.getMessage());
            f.assertTablesUnchanged(before, "a refused create");
            assertEquals(0, f.registrar.registrations.get() + f.registrar.failures.get());
            f.checkInvariants();
        }
    }

    @Test
    void anAllocationWithRegistrationLongerThanTheLimitIsRefusedNamingWhatToDo()
    {
        try (EngineFixture f = new EngineFixture(EngineOptions.at(BASE)))
        {
            f.registrar.maxRegionLength = 3 * SEG;
            assertDoesNotThrow(() -> f.engine.checkRegistersInOneMr(3 * SEG));
            assertDoesNotThrow(() -> f.engine.checkRegistersInOneMr(2 * SEG + 1));
            final MrdException ex = assertThrows(MrdException.class, () -> f.engine.checkRegistersInOneMr(3 * SEG + 1));
            assertEquals(ErrorCode.EINVAL, ex.code(), ex.oneLine());
            assertTrue(ex.getMessage().contains("max_mr_size " + 3 * SEG) &&
                ex.getMessage().contains("allocate without registration") && ex.getMessage().contains("at most 6MiB"),
                ex.getMessage());
        }
    }
}
