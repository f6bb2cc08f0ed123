package io.mrd.bench.report;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import javax.imageio.ImageIO;
import java.awt.image.BufferedImage;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class LookupPlotTest
{
    @Test
    void seriesHoldOnlyTheSizesThatWereMeasured()
    {
        final Map<String, ResultFile.Result> results = new HashMap<>();
        results.put("java:global.4096", new ResultFile.Result("java", "global.4096", 0, 40, "ns", ""));
        results.put("java:global.65536", new ResultFile.Result("java", "global.65536", 0, 80, "ns", ""));
        results.put("c:bottomhalf.256", new ResultFile.Result("c", "bottomhalf.256", 0, 20, "ns", ""));
        final List<LookupPlot.Series> series = LookupPlot.series(results);
        assertEquals(6, series.size());
        final LookupPlot.Series javaGlobal = series.get(0);
        assertEquals("Java global seqlock search", javaGlobal.name());
        assertEquals(2, javaGlobal.points().size());
        assertEquals(65536, javaGlobal.points().get(1)[0], 0);
        assertEquals(1, series.get(4).points().size());
    }

    @Test
    void writesAPngOfTheExpectedSize(@TempDir final Path dir) throws Exception
    {
        final Map<String, ResultFile.Result> results = new HashMap<>();
        results.put("java:global.4096", new ResultFile.Result("java", "global.4096", 0, 40, "ns", ""));
        results.put("c:global.4096", new ResultFile.Result("c", "global.4096", 0, 30, "ns", ""));
        final Path file = dir.resolve("lookup.png");
        LookupPlot.write(results, "test", file);
        final BufferedImage image = ImageIO.read(file.toFile());
        assertEquals(LookupPlot.WIDTH, image.getWidth());
        assertEquals(LookupPlot.HEIGHT, image.getHeight());
        assertTrue(image.getRGB(0, 0) != 0, "background drawn");
    }

    @Test
    void logAxesPutLargerValuesFurtherRightAndHigher()
    {
        final LookupPlot.Axis axis = new LookupPlot.Axis(0, 6, 0, 3, 600, 300);
        assertEquals(0, axis.x(1));
        assertEquals(600, axis.x(1_000_000));
        assertEquals(300, axis.y(1));
        assertEquals(0, axis.y(1000));
        assertTrue(axis.y(100) < axis.y(10));
    }
}
