package io.mrd.bench.report;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
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
        final ResultFile.Result result = ResultFile.parse("c\tglobal.65536\t141.216\tns");
        assertEquals("c", result.source());
        assertEquals("global.65536", result.row());
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
            () -> ResultFile.parse("java\tglobal.4096\t12.0"));
        assertTrue(fields.getMessage().contains("global.4096"), fields.getMessage());
        final IllegalArgumentException number = assertThrows(IllegalArgumentException.class,
            () -> ResultFile.parse("java\tglobal.4096\tfast\tns"));
        assertTrue(number.getMessage().contains("fast"), number.getMessage());
    }

    @Test
    void roundTripsThroughAFileAndJoinsEveryTsvOfADirectory(@TempDir final Path dir) throws Exception
    {
        ResultFile.append(dir.resolve("jmh.tsv"), new ResultFile.Result("java", "tophalf.mru", 1.5, "ns", "±0.1"));
        Files.writeString(dir.resolve("c.tsv"), "c\ttophalf.mru\t1.2\tns\n# done\n");
        Files.writeString(dir.resolve("notes.txt"), "not a result\n");
        final Map<String, ResultFile.Result> results = ResultFile.readAll(dir);
        assertEquals(2, results.size());
        assertEquals(1.5, results.get("java:tophalf.mru").value(), 1e-9);
        assertEquals("±0.1", results.get("java:tophalf.mru").note());
        assertEquals(1.2, results.get("c:tophalf.mru").value(), 1e-9);
    }
}
