package io.mrd.layout.sys;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.LongRange;
import org.junit.jupiter.api.Test;

import static io.mrd.layout.sys.Sizes.GIB;
import static io.mrd.layout.sys.Sizes.KIB;
import static io.mrd.layout.sys.Sizes.MIB;
import static io.mrd.layout.sys.Sizes.TIB;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

final class SizesTest
{
    @Test
    void parsesWhatOperatorsType()
    {
        assertEquals(64 * MIB, Sizes.parse("64MiB"));
        assertEquals(2 * GIB, Sizes.parse("2GiB"));
        assertEquals(2 * GIB, Sizes.parse("2g"));
        assertEquals(2 * GIB, Sizes.parse("2G"));
        assertEquals(2 * GIB, Sizes.parse("2gb"));
        assertEquals(4096, Sizes.parse("4096"));
        assertEquals(4096, Sizes.parse("4096b"));
        assertEquals(512 * KIB, Sizes.parse("512k"));
        assertEquals(512 * KIB, Sizes.parse("512KB"));
        assertEquals(3 * TIB, Sizes.parse("3TiB"));
        assertEquals(0, Sizes.parse("0"));
        // Surrounding blanks are trimmed and blanks between the number and its unit are allowed.
        assertEquals(GIB, Sizes.parse(" 1 GiB "));
        assertEquals(GIB, Sizes.parse("1\tg"));
        assertEquals(8_388_607 * TIB, Sizes.parse("8388607TiB"));
        assertEquals(Long.MAX_VALUE, Sizes.parse(Long.toString(Long.MAX_VALUE)));
    }

    @Test
    void refusesWhatIsNotASize()
    {
        for (final String bad : new String[]{"", "   ", "abc", "12XB", "-1", "1.5GiB", "GiB", "0x100", "1 2", "12 MiB x",
            "+5"})
        {
            final MrdException ex = assertThrows(MrdException.class, () -> Sizes.parse(bad), "'" + bad + "'");
            assertEquals(ErrorCode.EINVAL, ex.code(), "'" + bad + "'");
            assertTrue(ex.getMessage().contains("'" + bad + "'"), ex.getMessage());
            assertTrue(ex.getMessage().contains("64MiB"), ex.getMessage());
        }
        final MrdException nullText = assertThrows(MrdException.class, () -> Sizes.parse(null));
        assertEquals(ErrorCode.EINVAL, nullText.code());
    }

    @Test
    void refusesSizesOver64Bits()
    {
        for (final String big : new String[]{"99999999999TiB", "8388608TiB", "9007199254740992k"})
        {
            final MrdException ex = assertThrows(MrdException.class, () -> Sizes.parse(big), big);
            assertEquals(ErrorCode.ERANGE, ex.code(), big);
            assertTrue(ex.getMessage().contains(big), ex.getMessage());
        }
        // Too many digits for a long: refused as well (as EINVAL, since Long.parseLong rejects it).
        final MrdException digits = assertThrows(MrdException.class, () -> Sizes.parse("99999999999999999999"));
        assertTrue(digits.code() == ErrorCode.EINVAL || digits.code() == ErrorCode.ERANGE);
        assertTrue(digits.getMessage().contains("99999999999999999999"), digits.getMessage());
    }

    @Test
    void formatsInTheLargestUnitThatDivides()
    {
        assertEquals("0B", Sizes.format(0));
        assertEquals("1B", Sizes.format(1));
        assertEquals("1023B", Sizes.format(1023));
        assertEquals("1KiB", Sizes.format(KIB));
        assertEquals("1025B", Sizes.format(KIB + 1));
        assertEquals("512KiB", Sizes.format(512 * KIB));
        assertEquals("64MiB", Sizes.format(64 * MIB));
        assertEquals("1536MiB", Sizes.format(1536 * MIB));
        assertEquals("2GiB", Sizes.format(2 * GIB));
        assertEquals("5TiB", Sizes.format(5 * TIB));
    }

    @Property(tries = 500)
    void formatRoundTrips(@ForAll @LongRange(min = 0, max = Long.MAX_VALUE) final long bytes)
    {
        assertEquals(bytes, Sizes.parse(Sizes.format(bytes)));
    }

    @Property(tries = 300)
    void formatRoundTripsWholeUnits(
        @ForAll @LongRange(min = 0, max = 1 << 20) final long count,
        @ForAll @LongRange(min = 0, max = 4) final long power)
    {
        final long bytes = count << (10 * power);
        assertEquals(bytes, Sizes.parse(Sizes.format(bytes)));
    }

    @Test
    void parsesAddresses()
    {
        assertEquals(0x100000000000L, Sizes.parseAddress("0x100000000000"));
        assertEquals(0x7e0000000000L, Sizes.parseAddress("0X7E0000000000"));
        assertEquals(0xabcdefL, Sizes.parseAddress(" 0xabcdef "));
        assertEquals(4096, Sizes.parseAddress("4096"));
        assertEquals(0, Sizes.parseAddress("0"));
        assertEquals(-1L, Sizes.parseAddress("0xffffffffffffffff"));
        assertEquals("0x7e0000000000", Sizes.hex(Sizes.parseAddress("0x7e0000000000")));

        for (final String bad : new String[]{"", "0x", "zz", "0xg1", "12k", "0x1ffffffffffffffff", "1e6"})
        {
            final MrdException ex = assertThrows(MrdException.class, () -> Sizes.parseAddress(bad), bad);
            assertEquals(ErrorCode.EINVAL, ex.code(), bad);
            assertTrue(ex.getMessage().contains("'" + bad + "'"), ex.getMessage());
            assertTrue(ex.getMessage().contains("hex"), ex.getMessage());
        }
        assertEquals(ErrorCode.EINVAL, assertThrows(MrdException.class, () -> Sizes.parseAddress(null)).code());
        assertEquals("address ' -1' is negative: write it as hex (0x100000000000) or decimal",
            assertThrows(MrdException.class, () -> Sizes.parseAddress(" -1")).getMessage());
    }

    @Test
    void alignsToPowersOfTwo()
    {
        assertEquals(0, Sizes.alignUp(0, 4096));
        assertEquals(4096, Sizes.alignUp(1, 4096));
        assertEquals(4096, Sizes.alignUp(4096, 4096));
        assertEquals(2 * MIB, Sizes.alignUp(MIB + 1, 2 * MIB));
        assertEquals(0, Sizes.alignDown(4095, 4096));
        assertEquals(4096, Sizes.alignDown(8191, 4096));
        assertEquals("0x0", Sizes.hex(0));
    }
}
