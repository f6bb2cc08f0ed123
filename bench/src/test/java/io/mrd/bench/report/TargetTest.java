package io.mrd.bench.report;

import io.mrd.bench.report.Target.Verdict;
import org.junit.jupiter.api.Test;

import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;

class TargetTest
{
    private final Target ceiling = Target.atMost(1.2, "≤ 1.20× C");
    private final Target floor = Target.atLeast(0.8, "≥ 0.80× without");

    @Test
    void metWhenEveryRoundMeetsTheTarget()
    {
        assertEquals(Verdict.MET, ceiling.verdict(Spread.of(List.of(1.0, 1.1, 1.19, 0.9, 1.05))));
        assertEquals(Verdict.MET, floor.verdict(Spread.of(List.of(0.81, 0.9, 1.2))));
    }

    @Test
    void unstableWhenTheRangeCrossesTheTargetWhicheverSideTheMedianIs()
    {
        assertEquals(Verdict.UNSTABLE, ceiling.verdict(Spread.of(List.of(1.11, 1.51, 1.21))), "median 1.21 misses");
        assertEquals(Verdict.UNSTABLE, ceiling.verdict(Spread.of(List.of(1.0, 1.1, 1.4))), "median 1.1 meets");
        assertEquals(Verdict.UNSTABLE, floor.verdict(Spread.of(List.of(0.7, 0.9, 0.95, 0.85))));
    }

    @Test
    void noWhenNoRoundMeetsIt()
    {
        assertEquals(Verdict.NO, ceiling.verdict(Spread.of(List.of(1.3, 1.25, 1.9))));
        assertEquals(Verdict.NO, floor.verdict(Spread.of(List.of(0.5, 0.79))));
    }

    @Test
    void aValueOnTheLimitMeetsIt()
    {
        assertEquals(Verdict.MET, ceiling.verdict(Spread.of(List.of(1.2, 1.2))), "ties with the limit");
        assertEquals(Verdict.MET, floor.verdict(Spread.of(List.of(0.8))));
        assertEquals(Verdict.UNSTABLE, ceiling.verdict(Spread.of(List.of(1.2, 1.2000001))));
    }

    @Test
    void anEvenRoundCountJudgesTheRangeNotTheMeanOfTheMiddleTwo()
    {
        // Median (1.1 + 1.2) / 2 = 1.15 meets the ceiling, but round 4 does not: unstable.
        final Spread spread = Spread.of(List.of(1.0, 1.1, 1.2, 1.4));
        assertEquals(1.15, spread.median(), 1e-12);
        assertEquals(Verdict.UNSTABLE, ceiling.verdict(spread));
    }
}
