package io.mrd.bench.jmh;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.TearDown;

import java.lang.reflect.Field;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertFalse;

/**
 * Every benchmark state of the families {@code scripts/bench} runs ({@link LookupRounds#FAMILIES}) set up and torn
 * down with each value of each of its parameters, in this JVM, without JMH: a set-up that no longer fits the code
 * it times (a constructor made reflectively, a fixture's layout, a device's keys) fails here, in {@code mvn
 * verify}, instead of in the middle of a benchmark run, which would leave the part's rows "missing".
 */
class BenchmarkSetUpTest
{
    @ParameterizedTest
    @ValueSource(classes = {TopHalfBenchmark.class, HandleKeyBenchmark.class, BottomHalfBenchmark.class,
        GlobalCacheBenchmark.class, LkeyPathBenchmark.class, GlobalWriterBenchmark.class, PoolBenchmark.class,
        JournalAppendBenchmark.class, DeviceCacheBenchmark.class})
    void everyParameterValueSetsUpAndTearsDown(final Class<?> benchmark) throws ReflectiveOperationException
    {
        final List<Field> params = new ArrayList<>();
        for (final Field field : benchmark.getFields())
        {
            if (field.isAnnotationPresent(Param.class))
            {
                params.add(field);
            }
        }
        if (params.isEmpty())
        {
            setUpAndTearDown(benchmark, null, null);
        }
        for (final Field param : params)
        {
            final String[] values = param.getAnnotation(Param.class).value();
            assertFalse(values.length == 0, param + " lists no values");
            for (final String value : values)
            {
                setUpAndTearDown(benchmark, param, value);
            }
        }
    }

    /** The first value of every parameter but {@code param}, which is {@code value}. */
    private static void setUpAndTearDown(final Class<?> benchmark, final Field param, final String value)
        throws ReflectiveOperationException
    {
        final Object state = benchmark.getConstructor().newInstance();
        for (final Field field : benchmark.getFields())
        {
            if (field.isAnnotationPresent(Param.class))
            {
                set(state, field, field.equals(param) ? value : field.getAnnotation(Param.class).value()[0]);
            }
        }
        final String what = benchmark.getSimpleName() + (null == param ? "" : " with " + param.getName() + "=" +
            value);
        assertDoesNotThrow(() -> invokeAll(state, Setup.class), what + ": set-up");
        assertDoesNotThrow(() -> invokeAll(state, TearDown.class), what + ": tear-down");
    }

    private static void set(final Object state, final Field field, final String value) throws IllegalAccessException
    {
        if (field.getType() == int.class)
        {
            field.setInt(state, Integer.parseInt(value));
        }
        else
        {
            field.set(state, value);
        }
    }

    /** The state's own methods with the annotation that take no argument (JMH's trial level, as these use). */
    private static void invokeAll(final Object state, final Class<? extends java.lang.annotation.Annotation> kind)
        throws Throwable
    {
        for (final Method method : state.getClass().getMethods())
        {
            if (method.isAnnotationPresent(kind) && method.getParameterCount() == 0)
            {
                try
                {
                    method.invoke(state);
                }
                catch (final InvocationTargetException ex)
                {
                    throw ex.getCause();
                }
            }
        }
    }
}
