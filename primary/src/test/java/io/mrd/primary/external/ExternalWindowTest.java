package io.mrd.primary.external;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Sizes;
import io.mrd.testing.BaseAddresses;
import org.junit.jupiter.api.Test;

import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The external window's allocator on its own.
 */
class ExternalWindowTest
{
    /** Where the server tests' fourth class would place its window (clear of every other test's memory). */
    private static final long WINDOW = BaseAddresses.next();

    @Test
    void externalWindowIsFirstFitInTwoMebibyteGranules()
    {
        try (ExternalWindow window = new ExternalWindow(WINDOW, 8 * Sizes.MIB))
        {
            final ExternalWindow.Range a = window.allocate(4096, 1);
            final ExternalWindow.Range b = window.allocate(3 * Sizes.MIB, 2);
            final ExternalWindow.Range c = window.allocate(Sizes.MIB, 1);
            assertEquals(WINDOW, a.address());
            assertEquals(WINDOW + 2 * Sizes.MIB, b.address());
            assertEquals(WINDOW + 6 * Sizes.MIB, c.address());
            assertEquals(8 * Sizes.MIB, window.bytesInUse());
            final MrdException full = assertThrows(MrdException.class, () -> window.allocate(1, 3));
            assertEquals(ErrorCode.ENOMEM, full.code());
            assertTrue(full.getMessage().contains("--max-external"), full::getMessage);

            window.unmapAndFree(b);
            assertNull(window.find(b.address()));
            assertEquals(List.of(a, c), window.ownedBy(1));
            assertEquals(WINDOW + 2 * Sizes.MIB, window.allocate(4 * Sizes.MIB, 3).address());
            window.unmapAndFree(a);
            window.unmapAndFree(a);
            assertEquals(6 * Sizes.MIB, window.bytesInUse());
        }
        // closed: the range is free for the next window
        try (ExternalWindow again = new ExternalWindow(WINDOW, 8 * Sizes.MIB))
        {
            assertEquals(0, again.bytesInUse());
        }
    }

    @Test
    void disabledWindowRefusesWithTheFlag()
    {
        try (ExternalWindow window = new ExternalWindow(WINDOW, 0))
        {
            final MrdException ex = assertThrows(MrdException.class, () -> window.allocate(4096, 1));
            assertTrue(ex.getMessage().contains("--max-external 0"), ex::getMessage);
        }
    }
}
