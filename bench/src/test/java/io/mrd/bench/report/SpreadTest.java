package io.mrd.bench.report;

import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.TreeMap;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class SpreadTest
{
    @Test
    void anOddCountHasItsMiddleValueAsMedian()
    {
        assertEquals(new Spread(1.1, 0.9, 1.5, 5), Spread.of(List.of(1.5, 0.9, 1.1, 1.0, 1.2)));
    }

    @Test
    void anEvenCountHasTheMeanOfItsMiddleTwo()
    {
        assertEquals(new Spread(1.15, 0.9, 1.5, 4), Spread.of(List.of(1.5, 0.9, 1.1, 1.2)));
        assertEquals(new Spread(3.0, 2.0, 4.0, 2), Spread.of(List.of(4.0, 2.0)));
    }

    @Test
    void tiesAreKept()
    {
        assertEquals(new Spread(2.0, 1.0, 3.0, 4), Spread.of(List.of(2.0, 3.0, 2.0, 1.0)));
        assertEquals(new Spread(2.0, 2.0, 2.0, 3), Spread.of(List.of(2.0, 2.0, 2.0)));
    }

    @Test
    void oneRoundIsItsOwnRange()
    {
        assertEquals(new Spread(7.0, 7.0, 7.0, 1), Spread.of(List.of(7.0)));
        assertThrows(IllegalArgumentException.class, () -> Spread.of(List.of()));
    }

    @Test
    void pairsOnlyRoundsBothSidesHave()
    {
        final TreeMap<Integer, Double> row = new TreeMap<>();
        row.put(1, 10.0);
        row.put(2, 12.0);
        row.put(3, 30.0);
        final TreeMap<Integer, Double> reference = new TreeMap<>();
        reference.put(1, 10.0);
        reference.put(2, 8.0);
        reference.put(4, 1.0);
        final Spread spread = Spread.paired(row, reference, (a, b) -> a / b).orElseThrow();
        assertEquals(new Spread(1.25, 1.0, 1.5, 2), spread, "round 3 has no reference, round 4 no row");
        assertTrue(Spread.paired(row, new TreeMap<>(), (a, b) -> a / b).isEmpty());
    }

    @Test
    void theRatioIsPerRoundNotOfTheMedians()
    {
        // Java and C both slow in round 2: per round the ratio is 1.0 each time, the medians would say 1.5.
        final TreeMap<Integer, Double> java = new TreeMap<>();
        java.put(1, 10.0);
        java.put(2, 30.0);
        java.put(3, 15.0);
        final TreeMap<Integer, Double> c = new TreeMap<>();
        c.put(1, 10.0);
        c.put(2, 30.0);
        c.put(3, 15.0);
        assertEquals(new Spread(1.0, 1.0, 1.0, 3), Spread.paired(java, c, (a, b) -> a / b).orElseThrow());
    }
}
