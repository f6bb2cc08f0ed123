package io.mrd.bench.report;

import io.mrd.bench.report.ResultFile.Result;

import javax.imageio.ImageIO;
import java.awt.BasicStroke;
import java.awt.Color;
import java.awt.Font;
import java.awt.FontMetrics;
import java.awt.Graphics2D;
import java.awt.RenderingHints;
import java.awt.Stroke;
import java.awt.image.BufferedImage;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Draws lookup ns against table size, Java against C, as a PNG (headless AWT, no other dependency): the
 * top half (8 entries, other slot), the bottom-half search and the global seqlock search, both axes
 * logarithmic.
 */
public final class LookupPlot
{
    static final int WIDTH = 900;
    static final int HEIGHT = 560;
    private static final int LEFT = 80;
    private static final int RIGHT = 250;
    private static final int TOP = 50;
    private static final int BOTTOM = 60;

    private static final Color JAVA = new Color(0xD9, 0x5F, 0x02);
    private static final Color C = new Color(0x1B, 0x6A, 0xB0);

    /**
     * One line of the plot.
     */
    record Series(String name, Color color, boolean dashed, List<double[]> points)
    {
        boolean java()
        {
            return name.startsWith("Java");
        }
    }

    /**
     * The mark drawn at each point of a series.
     */
    enum Marker
    {
        DOT, SQUARE, DIAMOND
    }

    private static Marker marker(final Series s)
    {
        return s.name().contains("top half") ? Marker.DIAMOND : s.dashed() ? Marker.SQUARE : Marker.DOT;
    }

    private static void mark(final Graphics2D g, final Marker marker, final int x, final int y)
    {
        switch (marker)
        {
            case DOT -> g.fillOval(x - 4, y - 4, 9, 9);
            case SQUARE -> g.drawRect(x - 4, y - 4, 8, 8);
            case DIAMOND -> g.fillPolygon(new int[] {x, x + 6, x, x - 6}, new int[] {y - 6, y, y + 6, y}, 4);
        }
    }

    private LookupPlot()
    {
    }

    /**
     * @return the series the results hold (sizes without a value are left out).
     */
    static List<Series> series(final Map<String, Result> results)
    {
        final List<Series> series = new ArrayList<>();
        for (final String source : new String[] {"java", "c"})
        {
            final Color color = "java".equals(source) ? JAVA : C;
            final String who = "java".equals(source) ? "Java" : "C";
            series.add(new Series(who + " global seqlock search", color, false,
                points(results, source, "global.", ReportTable.GLOBAL_SIZES)));
            series.add(new Series(who + " bottom-half search", color, true,
                points(results, source, "bottomhalf.", ReportTable.BOTTOM_SIZES)));
            series.add(new Series(who + " top half (8, other slot)", color, true,
                points(results, source, "tophalf.other", new int[] {8})));
        }
        return series;
    }

    private static List<double[]> points(
        final Map<String, Result> results, final String source, final String row, final int[] sizes)
    {
        final List<double[]> points = new ArrayList<>();
        for (final int size : sizes)
        {
            final String key = source + ":" + (row.endsWith(".") ? row + size : row);
            final Result result = results.get(key);
            if (null != result && result.value() > 0)
            {
                points.add(new double[] {size, result.value()});
            }
        }
        return points;
    }

    /**
     * Writes the plot to {@code file}.
     */
    public static void write(final Map<String, Result> results, final String subtitle, final Path file)
    {
        System.setProperty("java.awt.headless", "true");
        final BufferedImage image = render(series(results), subtitle);
        try
        {
            ImageIO.write(image, "png", file.toFile());
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException("cannot write " + file, ex);
        }
    }

    static BufferedImage render(final List<Series> series, final String subtitle)
    {
        final BufferedImage image = new BufferedImage(WIDTH, HEIGHT, BufferedImage.TYPE_INT_RGB);
        final Graphics2D g = image.createGraphics();
        g.setRenderingHint(RenderingHints.KEY_ANTIALIASING, RenderingHints.VALUE_ANTIALIAS_ON);
        g.setRenderingHint(RenderingHints.KEY_TEXT_ANTIALIASING, RenderingHints.VALUE_TEXT_ANTIALIAS_ON);
        g.setColor(Color.WHITE);
        g.fillRect(0, 0, WIDTH, HEIGHT);

        double maxNs = 10;
        for (final Series s : series)
        {
            for (final double[] p : s.points())
            {
                maxNs = Math.max(maxNs, p[1]);
            }
        }
        final double xMin = Math.log10(4);
        final double xMax = Math.log10(2 << 20);
        final double yMin = 0;
        final double yMax = Math.ceil(Math.log10(maxNs * 1.15));
        final int plotWidth = WIDTH - LEFT - RIGHT;
        final int plotHeight = HEIGHT - TOP - BOTTOM;
        final Axis axis = new Axis(xMin, xMax, yMin, yMax, plotWidth, plotHeight);

        g.setFont(new Font(Font.SANS_SERIF, Font.BOLD, 16));
        g.setColor(Color.BLACK);
        g.drawString("mrd lookup: ns per lookup vs table size, Java vs C", LEFT, 24);
        g.setFont(new Font(Font.SANS_SERIF, Font.PLAIN, 11));
        g.drawString(subtitle, LEFT, 40);

        // Grid and ticks.
        final Stroke thin = new BasicStroke(1f);
        g.setStroke(thin);
        final FontMetrics metrics = g.getFontMetrics();
        for (int exp = 2; exp <= 20; exp += 2)
        {
            final int x = LEFT + axis.x(Math.pow(2, exp));
            g.setColor(new Color(0xE6, 0xE6, 0xE6));
            g.drawLine(x, TOP, x, TOP + plotHeight);
            g.setColor(Color.DARK_GRAY);
            final String label = exp < 10 ? String.valueOf(1 << exp) :
                exp < 20 ? (1 << (exp - 10)) + "Ki" : (1 << (exp - 20)) + "Mi";
            g.drawString(label, x - metrics.stringWidth(label) / 2, TOP + plotHeight + 16);
        }
        for (int decade = (int)yMin; decade <= (int)yMax; decade++)
        {
            for (final int m : new int[] {1, 2, 5})
            {
                final double v = m * Math.pow(10, decade);
                if (Math.log10(v) > yMax + 1e-9)
                {
                    continue;
                }
                final int y = TOP + axis.y(v);
                g.setColor(new Color(0xE6, 0xE6, 0xE6));
                g.drawLine(LEFT, y, LEFT + plotWidth, y);
                g.setColor(Color.DARK_GRAY);
                final String label = v >= 1 ? String.format(Locale.ROOT, "%.0f", v) : String.valueOf(v);
                g.drawString(label, LEFT - 8 - metrics.stringWidth(label), y + 4);
            }
        }
        g.setColor(Color.BLACK);
        g.drawRect(LEFT, TOP, plotWidth, plotHeight);
        g.drawString("entries in the table (log scale)", LEFT + plotWidth / 2 - 80, HEIGHT - 18);
        final Graphics2D rotated = (Graphics2D)g.create();
        rotated.rotate(-Math.PI / 2);
        rotated.drawString("ns per lookup (log scale)", -(TOP + plotHeight / 2 + 60), 22);
        rotated.dispose();

        // Series and legend.
        int legendY = TOP + 10;
        for (final Series s : series)
        {
            final Stroke stroke = s.dashed() ?
                new BasicStroke(2f, BasicStroke.CAP_BUTT, BasicStroke.JOIN_ROUND, 1f, new float[] {7f, 5f}, 0f) :
                new BasicStroke(2.5f);
            g.setColor(s.color());
            g.setStroke(stroke);
            int px = -1;
            int py = -1;
            for (final double[] p : s.points())
            {
                final int x = LEFT + axis.x(p[0]);
                final int y = TOP + axis.y(p[1]);
                if (px >= 0)
                {
                    g.drawLine(px, py, x, y);
                }
                px = x;
                py = y;
            }
            g.setStroke(thin);
            for (final double[] p : s.points())
            {
                final int x = LEFT + axis.x(p[0]);
                final int y = TOP + axis.y(p[1]);
                mark(g, marker(s), x, y);
                // Java's values above the point, C's below, so that close values stay readable.
                g.drawString(String.format(Locale.ROOT, p[1] < 10 ? "%.1f" : "%.0f", p[1]), x + 7,
                    s.java() ? y - 7 : y + 16);
            }
            final int lx = LEFT + plotWidth + 16;
            g.setStroke(stroke);
            g.drawLine(lx, legendY, lx + 30, legendY);
            g.setStroke(thin);
            mark(g, marker(s), lx + 15, legendY);
            g.setColor(Color.BLACK);
            g.drawString(s.name(), lx + 36, legendY + 4);
            legendY += 20;
        }
        g.dispose();
        return image;
    }

    /**
     * Log-log mapping of values to pixels inside the plot area.
     */
    record Axis(double xMin, double xMax, double yMin, double yMax, int width, int height)
    {
        int x(final double entries)
        {
            return (int)Math.round((Math.log10(entries) - xMin) / (xMax - xMin) * width);
        }

        int y(final double ns)
        {
            return (int)Math.round(height - (Math.log10(ns) - yMin) / (yMax - yMin) * height);
        }
    }
}
