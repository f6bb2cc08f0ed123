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
        final int access = bits & Access.KNOWN;
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
}
