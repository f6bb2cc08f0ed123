package io.mrd.bench.report;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class ResultFileTest
{
    @Test
    void parsesTheLinesTheCReferencePrints()
    {
        final ResultFile.Result result = ResultFile.parse("c\tglobal.65536\t3\t141.216\tns");
        assertEquals("c", result.source());
        assertEquals("global.65536", result.row());
        assertEquals(3, result.round());
        assertEquals(141.216, result.value(), 1e-9);
        assertEquals("ns", result.unit());
        assertEquals("", result.note());
        assertEquals("c:global.65536", result.key());
    }

    @Test
    void skipsCommentsAndBlankLines()
    {
        assertNull(ResultFile.parse("# a comment"));
        assertNull(ResultFile.parse("   "));
    }

    @Test
    void refusesMalformedLinesNamingThem()
    {
        final IllegalArgumentException fields = assertThrows(IllegalArgumentException.class,
            () -> ResultFile.parse("java\tglobal.4096\t12.0\tns"));
        assertTrue(fields.getMessage().contains("round"), fields.getMessage());
        final IllegalArgumentException round = assertThrows(IllegalArgumentException.class,
            () -> ResultFile.parse("java\tglobal.4096\t1.5\t12.0\tns"));
        assertTrue(round.getMessage().contains("global.4096"), round.getMessage());
        final IllegalArgumentException number = assertThrows(IllegalArgumentException.class,
            () -> ResultFile.parse("java\tglobal.4096\t1\tfast\tns"));
        assertTrue(number.getMessage().contains("fast"), number.getMessage());
    }

    @Test
    void roundTripsThroughAFileAndJoinsEveryTsvOfADirectoryByRound(@TempDir final Path dir) throws Exception
    {
        ResultFile.append(dir.resolve("jmh.tsv"), List.of(
            new ResultFile.Result("java", "tophalf.mru", 1, 1.5, "ns", "best"),
            new ResultFile.Result("java", "tophalf.mru", 2, 1.7, "ns", "")));
        Files.writeString(dir.resolve("c.tsv"), "c\ttophalf.mru\t1\t1.2\tns\n# done\nc\ttophalf.mru\t1\t1.1\tns\n");
        Files.writeString(dir.resolve("notes.txt"), "not a result\n");
        final Results results = ResultFile.readAll(dir);
        assertEquals(Map.of(1, 1.5, 2, 1.7), results.rounds("java", "tophalf.mru"));
        assertEquals(Map.of(1, 1.1), results.rounds("c", "tophalf.mru"), "a later line of the same round wins");
        assertEquals(1.6, results.median("java", "tophalf.mru").getAsDouble(), 1e-9);
        assertEquals(1.6, results.medians().get("java:tophalf.mru").value(), 1e-9);
        assertTrue(results.rounds("c", "global.4096").isEmpty());
    }

    @Test
    void aNaNIsAMissingRoundAndCountsSum()
    {
        final Results results = new Results();
        results.add(new ResultFile.Result("multi", "lookups.2.errors", 1, 3, "failed lookups", ""));
        results.add(new ResultFile.Result("multi", "lookups.2.errors", 2, 4, "failed lookups", ""));
        results.add(new ResultFile.Result("multi", "alloc.8g.lookup", 1, Double.NaN, "GB/s", ""));
        assertEquals(7, results.sum("multi", "lookups.2.errors"), 1e-9);
        assertTrue(results.median("multi", "alloc.8g.lookup").isEmpty());
    }
}
