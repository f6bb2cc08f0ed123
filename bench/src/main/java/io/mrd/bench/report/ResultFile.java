package io.mrd.bench.report;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.stream.Stream;

/**
 * The one format every part of the benchmark writes its numbers in, so that the report can join them:
 * tab-separated lines {@code source  row  value  unit  [note]}, where source is {@code java}, {@code c} or
 * {@code multi}, and row names a measurement ({@code global.65536}, {@code pingpong.p50}, ...). The C
 * programs print the same lines. Lines starting with {@code #} and blank lines are ignored.
 */
public final class ResultFile
{
    /** The system property naming the results directory that forked benchmark JVMs append to. */
    public static final String OUT_PROPERTY = "mrd.bench.out";

    private ResultFile()
    {
    }

    /**
     * One measurement.
     */
    public record Result(String source, String row, double value, String unit, String note)
    {
        public String key()
        {
            return source + ":" + row;
        }

        public String toLine()
        {
            return source + "\t" + row + "\t" + String.format(Locale.ROOT, "%.4f", value) + "\t" + unit +
                (note.isEmpty() ? "" : "\t" + note);
        }
    }

    public static void append(final Path file, final Result result)
    {
        try
        {
            Files.writeString(file, result.toLine() + "\n", StandardCharsets.UTF_8,
                StandardOpenOption.CREATE, StandardOpenOption.APPEND);
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException("cannot write " + file, ex);
        }
    }

    /**
     * Appends to {@code fileName} in the directory named by {@value #OUT_PROPERTY}, if it is set (forked JMH
     * JVMs get it from the runner).
     */
    public static void appendIfConfigured(
        final String fileName, final String source, final String row, final double value, final String unit)
    {
        final String dir = System.getProperty(OUT_PROPERTY);
        if (null != dir)
        {
            append(Path.of(dir).resolve(fileName), new Result(source, row, value, unit, ""));
        }
    }

    /**
     * @return the results of one line, or null for a comment or a blank line.
     * @throws IllegalArgumentException naming the line when it is malformed.
     */
    public static Result parse(final String line)
    {
        final String trimmed = line.strip();
        if (trimmed.isEmpty() || trimmed.startsWith("#"))
        {
            return null;
        }
        final String[] fields = trimmed.split("\t");
        if (fields.length < 4)
        {
            throw new IllegalArgumentException("result line needs source, row, value and unit separated by tabs: '" +
                line + "'");
        }
        final double value;
        try
        {
            value = Double.parseDouble(fields[2].strip());
        }
        catch (final NumberFormatException ex)
        {
            throw new IllegalArgumentException("result line has no number in its third field: '" + line + "'", ex);
        }
        return new Result(fields[0].strip(), fields[1].strip(), value, fields[3].strip(),
            fields.length > 4 ? fields[4].strip() : "");
    }

    /**
     * Reads every {@code *.tsv} of {@code dir}; a later line for the same source and row replaces an earlier one.
     *
     * @return the results by {@link Result#key()}.
     */
    public static Map<String, Result> readAll(final Path dir)
    {
        final Map<String, Result> results = new LinkedHashMap<>();
        final List<Path> files;
        try (Stream<Path> list = Files.list(dir))
        {
            files = list.filter(p -> p.getFileName().toString().endsWith(".tsv")).sorted().toList();
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException("cannot list " + dir, ex);
        }
        for (final Path file : files)
        {
            try
            {
                for (final String line : Files.readAllLines(file, StandardCharsets.UTF_8))
                {
                    final Result result = parse(line);
                    if (null != result)
                    {
                        results.put(result.key(), result);
                    }
                }
            }
            catch (final IOException ex)
            {
                throw new UncheckedIOException("cannot read " + file, ex);
            }
        }
        return results;
    }
}
