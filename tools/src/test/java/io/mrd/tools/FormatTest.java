package io.mrd.tools;

import io.mrd.layout.sys.Sizes;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;

class FormatTest
{
    @Test
    void rangesAreHalfOpenHex()
    {
        assertEquals("[0x100000200000, 0x100000400000)", Format.range(0x1000_0020_0000L, 0x1000_0040_0000L));
    }

    @Test
    void keysAreUnsigned()
    {
        assertEquals("0x103", Format.key(0x103));
        assertEquals("0x80000001", Format.key(0x8000_0001));
        assertEquals("0xffffffff", Format.key(-1));
    }

    @Test
    void sizesAreExactOrToOneDecimal()
    {
        assertEquals(Sizes.format(2 * Sizes.MIB), Format.size(2 * Sizes.MIB));
        assertEquals(Sizes.format(1000), Format.size(1000));
        assertEquals("1536KiB", Format.size(3 * Sizes.MIB / 2));
        assertEquals("1.5MiB", Format.size(3 * Sizes.MIB / 2 + 1));
        assertEquals("1.0KiB", Format.size(Sizes.KIB + 1));
    }

    @Test
    void pluralsCountOneAlone()
    {
        assertEquals("0 lists", Format.plural(0, "list"));
        assertEquals("1 list", Format.plural(1, "list"));
        assertEquals("2 lists", Format.plural(2, "list"));
    }

    @Test
    void durationsGrowUnits()
    {
        assertEquals("0.0s", Format.duration(-5));
        assertEquals("3.4s", Format.duration(3_456));
        assertEquals("2m03s", Format.duration(123_000));
        assertEquals("1h02m03s", Format.duration(3_723_000));
    }

    @Test
    void segmentsAreOneIndexOrARange()
    {
        assertEquals("4", Format.segments(4, 1));
        assertEquals("4-7", Format.segments(4, 4));
    }
}
