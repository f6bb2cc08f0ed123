package io.mrd.layout;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The access flags: libibverbs' values, what mrd grants for a request, and the names tools print and parse.
 */
final class AccessTest
{
    @Test
    void valuesAreLibibverbs()
    {
        // enum ibv_access_flags in verbs.h
        assertEquals(1, Access.LOCAL_WRITE);
        assertEquals(2, Access.REMOTE_WRITE);
        assertEquals(4, Access.REMOTE_READ);
        assertEquals(8, Access.REMOTE_ATOMIC);
        assertEquals(1 << 20, Access.RELAXED_ORDERING);
        assertEquals(0, Access.NO_RKEY);
    }

    @Test
    void grantedAddsLocalWriteAndKeepsWhatWasAsked()
    {
        assertEquals(Access.LOCAL_WRITE, Access.granted(0, "ALLOC"));
        assertEquals(Access.LOCAL_WRITE | Access.REMOTE_WRITE, Access.granted(Access.REMOTE_WRITE, "ALLOC"));
        assertEquals(Access.KNOWN, Access.granted(Access.REMOTE, "ALLOC"));
        assertFalse(Access.isRemote(Access.granted(Access.LOCAL, "ALLOC")));
        assertTrue(Access.isRemote(Access.granted(Access.REMOTE_ATOMIC, "ALLOC")));
    }

    @Test
    void unknownBitsAreRefusedByName()
    {
        final MrdException ex = assertThrows(MrdException.class,
            () -> Access.granted(Access.REMOTE_READ | 0x40 | Access.RELAXED_ORDERING, "REG_EXTERNAL"));
        assertEquals(ErrorCode.EINVAL, ex.code());
        assertTrue(ex.getMessage().contains("REG_EXTERNAL access 0x100044 has unknown bits 0x100040"),
            ex.getMessage());
        assertTrue(ex.getMessage().contains("local-write,remote-write,remote-read,remote-atomic"), ex.getMessage());
    }

    @Test
    void describesInVerbsOrder()
    {
        assertEquals("none", Access.describe(0));
        assertEquals("local-write", Access.describe(Access.LOCAL));
        assertEquals("local-write,remote-read", Access.describe(Access.REMOTE_READ | Access.LOCAL_WRITE));
        assertEquals("remote-write,relaxed-ordering,0x40", Access.describe(Access.REMOTE_WRITE | 0x40 |
            Access.RELAXED_ORDERING));
    }

    @Property(tries = 100)
    void parseReadsWhatDescribePrints(@ForAll final int bits)
    {
        final int access = bits & (Access.KNOWN | Access.PLACEMENT);
        if (access != 0)
        {
            assertEquals(access, Access.parse(Access.describe(access)));
        }
    }

    @Test
    void parseRefusesAWordThatIsNoFlag()
    {
        assertEquals(Access.LOCAL | Access.REMOTE_WRITE, Access.parse("local, remote-write"));
        final MrdException ex = assertThrows(MrdException.class, () -> Access.parse("remote-read,remote-exec"));
        assertEquals(ErrorCode.EINVAL, ex.code());
        assertTrue(ex.getMessage().contains("'remote-exec' is not a flag"), ex.getMessage());
        assertThrows(MrdException.class, () -> Access.parse("relaxed-ordering"));
        assertThrows(MrdException.class, () -> Access.parse(""));
    }

    @Property(tries = 200)
    void aPlacementIsOnTheDevicesItNamesAndNoneIsOnEvery(@ForAll final byte mask, @ForAll final int flags)
    {
        final int[] named = java.util.stream.IntStream.range(0, 8).filter(d -> (mask >>> d & 1) != 0).toArray();
        final int access = (flags & Access.KNOWN) | Access.onDevices(named);
        for (int device = 0; device < DeviceDescriptor.MAX_DEVICES; device++)
        {
            // The reference: no device named is every device.
            final int d = device;
            final boolean expected = 0 == named.length || java.util.Arrays.stream(named).anyMatch(n -> n == d);
            assertEquals(expected, Access.isOn(access, d), () -> Access.describe(access) + " on device " + d);
        }
        assertEquals(flags & Access.KNOWN, Access.verbs(access), "ibv_reg_mr gets the flags alone");
        assertEquals(access | Access.LOCAL_WRITE, Access.granted(access, "ALLOC"), "a placement is granted as asked");
    }

    @Test
    void aPlacementPastTheDaemonsDevicesIsRefusedByNumber()
    {
        assertEquals("local-write,remote-read,device-4,device-5",
            Access.describe(Access.LOCAL_WRITE | Access.REMOTE_READ | Access.onDevices(5, 4)));
        assertEquals(Access.LOCAL | Access.onDevices(1), Access.parse("local,device-1"));
        Access.requirePlacedWithin(Access.onDevices(0, 1), 2, "ALLOC");
        Access.requirePlacedWithin(Access.LOCAL, 1, "ALLOC");
        final MrdException past = assertThrows(MrdException.class,
            () -> Access.requirePlacedWithin(Access.onDevices(1, 3, 6), 2, "ALLOC"));
        assertEquals("EINVAL: ALLOC places the memory on device 3, and the daemon has 2 devices (0 to 1): name " +
            "devices of its --device list in Access.onDevices, or none for all", past.oneLine());
        final MrdException eight = assertThrows(MrdException.class, () -> Access.onDevices(8));
        assertTrue(eight.getMessage().contains("device 8 cannot be placed on"), eight.getMessage());
        final MrdException word = assertThrows(MrdException.class, () -> Access.parse("local,device-x"));
        assertTrue(word.getMessage().contains("'device-x' is not a device"), word.getMessage());
    }
}
