/*
 * The parts the corpus jobs (BpmonCorpusJobs) are built from: a paced source that reports
 * FLIP-33 pendingRecords, costs paid by sleeping or by spinning on the CPU, key plans that say
 * how much of a keyed stream each subtask receives (from Flink's own key-group assignment), an
 * async lookup with a fixed latency, sinks that write per record or in batches.
 */

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.api.connector.sink2.WriterInitContext;
import org.apache.flink.api.connector.source.Boundedness;
import org.apache.flink.api.connector.source.ReaderOutput;
import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.api.connector.source.lib.NumberSequenceSource;
import org.apache.flink.api.connector.source.lib.NumberSequenceSource.NumberSequenceSplit;
import org.apache.flink.core.io.InputStatus;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.streaming.api.functions.async.ResultFuture;
import org.apache.flink.streaming.api.functions.async.RichAsyncFunction;

public final class CorpusParts {

    private CorpusParts() {}

    /** One daemon thread per TaskManager JVM for the sources' wake-ups and the async replies. */
    static final ScheduledExecutorService TIMER =
            Executors.newSingleThreadScheduledExecutor(
                    r -> {
                        Thread t = new Thread(r, "bpmon-corpus-timer");
                        t.setDaemon(true);
                        return t;
                    });

    // -- the source ------------------------------------------------------------------------------

    /**
     * A FLIP-27 source of numbers that are *offered* at ``rate`` per second (split over its
     * subtasks), as a Kafka topic is written to: records due but not yet read are owed, and the
     * reader reports them as FLIP-33 ``pendingRecords``. A reader that keeps up owes ~0; one
     * held back (by backpressure, or by a costly operator chained to it) reads as fast as it can
     * and its pendingRecords grow by (offered - read) per second. Flink's DataGeneratorSource
     * reports no pendingRecords (its rate limiter drops what it could not emit), so it cannot
     * show a source that falls behind.
     *
     * <p>``pending`` false: the same source without the gauge (a source that reports no lag, as
     * most do), so the offered rate has to be estimated. ``backlog`` and ``epochMillis``: a
     * topic written to since ``epochMillis`` (wall clock) that already held ``backlog`` records
     * then; what is owed survives a restart (a rescale): the records read are the position
     * in the one split, restored from the checkpoint, so this mode runs at parallelism 1.
     * ``epochMillis`` 0: owed from each reader's start, as before.
     */
    static final class PacedSource extends NumberSequenceSource {
        private final double rate;
        private final boolean pending;
        private final long backlog;
        private final long epochMillis;

        PacedSource(double rate) {
            this(rate, true, 0, 0);
        }

        PacedSource(double rate, boolean pending, long backlog, long epochMillis) {
            super(0, Long.MAX_VALUE - 1);
            this.rate = rate;
            this.pending = pending;
            this.backlog = backlog;
            this.epochMillis = epochMillis;
        }

        @Override
        public Boundedness getBoundedness() {
            return Boundedness.CONTINUOUS_UNBOUNDED;
        }

        @Override
        public SourceReader<Long, NumberSequenceSplit> createReader(SourceReaderContext context) {
            int parallelism = Math.max(1, context.currentParallelism());
            if (epochMillis > 0 && parallelism > 1) {
                throw new IllegalArgumentException("a source with a backlog runs at parallelism 1");
            }
            return new PacedReader(context, rate / parallelism, pending, backlog, epochMillis);
        }
    }

    /** Reads its splits' numbers on a wall-clock schedule of ``rate`` per second, owing
     * ``backlog`` more from the start (see {@link PacedSource}). */
    static final class PacedReader implements SourceReader<Long, NumberSequenceSplit> {
        private final SourceReaderContext context;
        private final double rate;
        private final boolean pending;
        private final long backlog;
        private final long epochMillis;
        private final List<NumberSequenceSplit> splits = new ArrayList<>();
        private long began;
        private volatile long read;
        private long next;
        private long end = -1;
        private String splitId = "";

        PacedReader(
                SourceReaderContext context,
                double rate,
                boolean pending,
                long backlog,
                long epochMillis) {
            this.context = context;
            this.rate = rate;
            this.pending = pending;
            this.backlog = backlog;
            this.epochMillis = epochMillis;
        }

        @Override
        public void start() {
            began = System.nanoTime();
            if (epochMillis > 0) {
                began -= (System.currentTimeMillis() - epochMillis) * 1_000_000L;
            }
            if (pending) {
                context.metricGroup().setPendingRecordsGauge(() -> Math.max(0L, due() - read));
            }
            context.sendSplitRequest();
        }

        private long due() {
            return backlog + (long) ((System.nanoTime() - began) / 1e9 * rate);
        }

        @Override
        public InputStatus pollNext(ReaderOutput<Long> output) {
            if (next > end && !takeSplit()) {
                return InputStatus.NOTHING_AVAILABLE;
            }
            if (read >= due()) {
                return InputStatus.NOTHING_AVAILABLE;
            }
            output.collect(next++);
            read++;
            return InputStatus.MORE_AVAILABLE;
        }

        private boolean takeSplit() {
            if (splits.isEmpty()) {
                return false;
            }
            NumberSequenceSplit split = splits.remove(0);
            splitId = split.splitId();
            next = split.from();
            end = split.to();
            if (epochMillis > 0) {
                read = next; // one split from 0: its position is what was read, over restarts
            }
            return true;
        }

        @Override
        public CompletableFuture<Void> isAvailable() {
            CompletableFuture<Void> ready = new CompletableFuture<>();
            long waitNanos =
                    (long) (((read + 1 - backlog) / rate) * 1e9) - (System.nanoTime() - began);
            long micros = Math.max(200, Math.min(waitNanos / 1000, 50_000));
            TIMER.schedule(() -> ready.complete(null), micros, TimeUnit.MICROSECONDS);
            return ready;
        }

        @Override
        public List<NumberSequenceSplit> snapshotState(long checkpointId) {
            List<NumberSequenceSplit> state = new ArrayList<>(splits);
            if (next <= end) {
                state.add(0, new NumberSequenceSplit(splitId, next, end));
            }
            return state;
        }

        @Override
        public void addSplits(List<NumberSequenceSplit> added) {
            splits.addAll(added);
        }

        @Override
        public void notifyNoMoreSplits() {}

        @Override
        public void close() {}
    }

    // -- costs -----------------------------------------------------------------------------------

    /** Sleeps ``micros`` per record on average (one sleep per millisecond of debt): a call to an
     * external system. A sleeping thread is busy for Flink's time accounting and for a stack
     * sample, and leaves the shared CPU to others.
     *
     * <p>A sleep that wakes late has served the extra time too: it counts against the debt (up
     * to {@link #MAX_CREDIT_NANOS} of credit, 20 ms, the lag bpmon's own runtime forgives: a
     * loaded machine's run queue holds a woken thread that long), so a record costs ``micros``
     * however loaded the machine is (measured per record: 1.27-1.31 ms beside six CPU hogs
     * without the credit, 1.00 ms with it). Only the sleep's own overrun is credited, never time
     * spent waiting for input, so an idle subtask gets no records for free. */
    static final class Sleep implements java.io.Serializable {
        static final long MAX_CREDIT_NANOS = 20_000_000L;
        private final long micros;
        private long debtNanos;

        Sleep(long micros) {
            this.micros = micros;
        }

        void pay() throws InterruptedException {
            debtNanos += micros * 1000;
            if (debtNanos >= 1_000_000L) {
                long began = System.nanoTime();
                Thread.sleep(debtNanos / 1_000_000L); // whole milliseconds: park would look idle
                debtNanos = Math.max(-MAX_CREDIT_NANOS, debtNanos - (System.nanoTime() - began));
            }
        }
    }

    private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();
    private static final boolean CPU_TIME = THREADS.isCurrentThreadCpuTimeSupported();

    /**
     * Spins until this thread has run ``micros`` of CPU: a parse, a regex, a model. CPU time, not
     * wall time: a thread preempted halfway (a busy TaskManager) resumes with the rest of its work
     * still to do, as a real parser does. A spin on ``System.nanoTime`` would end at once after a
     * long preemption, and a thread dump requested meanwhile (taken at the thread's next
     * safepoint) would find the thread in the NEXT operator of its chain.
     */
    static long spin(long micros, long seed) {
        long until = cpuNanos() + micros * 1000;
        long x = seed;
        while (cpuNanos() < until) {
            for (int i = 0; i < 64; i++) {
                x = x * 6364136223846793005L + 1442695040888963407L;
            }
        }
        return x;
    }

    private static long cpuNanos() {
        return CPU_TIME ? THREADS.getCurrentThreadCpuTime() : System.nanoTime();
    }

    /** A map that sleeps ``micros`` per record. */
    static final class SleepMap implements MapFunction<Long, Long> {
        private final Sleep cost;

        SleepMap(long micros) {
            this.cost = new Sleep(micros);
        }

        @Override
        public Long map(Long value) throws Exception {
            cost.pay();
            return value;
        }
    }

    /** A map that spins ``micros`` of CPU per record. */
    static final class SpinMap implements MapFunction<Long, Long> {
        private final long micros;

        SpinMap(long micros) {
            this.micros = micros;
        }

        @Override
        public Long map(Long value) {
            return spin(micros, value) == 42 ? value + 1 : value;
        }
    }

    /** A map whose subtask ``slow`` sleeps ``slowMicros`` per record, the others ``micros``:
     * one instance on a worse machine, a noisy neighbour, a bad disk. */
    static final class SlowInstanceMap extends RichMapFunction<Long, Long> {
        private final long micros;
        private final long slowMicros;
        private final int slow;
        private transient Sleep cost;

        SlowInstanceMap(long micros, long slowMicros, int slow) {
            this.micros = micros;
            this.slowMicros = slowMicros;
            this.slow = slow;
        }

        @Override
        public void open(OpenContext context) {
            int index = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
            cost = new Sleep(index == slow ? slowMicros : micros);
        }

        @Override
        public Long map(Long value) throws Exception {
            cost.pay();
            return value;
        }
    }

    // -- keys ------------------------------------------------------------------------------------

    /**
     * A distribution of keys and what share of the records each subtask of a keyed operator
     * receives, by Flink's key groups (``KeyGroupRangeAssignment``, max parallelism 128, the
     * default below 86 subtasks): where hot keys land is Flink's business, the plan reads it.
     */
    static final class KeyPlan implements java.io.Serializable {
        final long[] keys;
        final double[] cumulative;
        final double[] shares;

        KeyPlan(long[] keys, double[] weights, int parallelism) {
            this.keys = keys;
            this.cumulative = new double[keys.length];
            this.shares = new double[parallelism];
            double total = 0;
            for (double w : weights) {
                total += w;
            }
            double sum = 0;
            for (int i = 0; i < keys.length; i++) {
                sum += weights[i] / total;
                cumulative[i] = sum;
                int sub = KeyGroupRangeAssignment.assignKeyToParallelOperator(keys[i], 128, parallelism);
                shares[sub] += weights[i] / total;
            }
        }

        /** Keys 0..n-1 with weights 1 / (k + 1)^s (Zipf). */
        static KeyPlan zipf(int n, double s, int parallelism) {
            long[] keys = new long[n];
            double[] weights = new double[n];
            for (int k = 0; k < n; k++) {
                keys[k] = k;
                weights[k] = 1.0 / Math.pow(k + 1, s);
            }
            return new KeyPlan(keys, weights, parallelism);
        }

        /** One hot key with ``hot`` of the records, the rest spread over ``cold`` keys. */
        static KeyPlan hot(double hot, int cold, int parallelism) {
            long[] keys = new long[cold + 1];
            double[] weights = new double[cold + 1];
            keys[0] = -1;
            weights[0] = hot;
            for (int k = 1; k <= cold; k++) {
                keys[k] = k;
                weights[k] = (1 - hot) / cold;
            }
            return new KeyPlan(keys, weights, parallelism);
        }

        /** ``n`` keys of equal weight. */
        static KeyPlan uniform(int n, int parallelism) {
            return hot(1.0 / n, n - 1, parallelism);
        }

        /** The largest share one subtask receives. */
        double hottest() {
            double most = 0;
            for (double s : shares) {
                most = Math.max(most, s);
            }
            return most;
        }

        long pick(double u) {
            int lo = 0;
            int hi = cumulative.length - 1;
            while (lo < hi) {
                int mid = (lo + hi) >>> 1;
                if (cumulative[mid] < u) {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            return keys[lo];
        }
    }

    /** Replaces each number by a key drawn from a plan (seeded per subtask: reproducible). */
    static final class PickKey extends RichMapFunction<Long, Long> {
        private final KeyPlan plan;
        private transient SplittableRandom random;

        PickKey(KeyPlan plan) {
            this.plan = plan;
        }

        @Override
        public void open(OpenContext context) {
            random = new SplittableRandom(17 + getRuntimeContext().getTaskInfo().getIndexOfThisSubtask());
        }

        @Override
        public Long map(Long value) {
            return plan.pick(random.nextDouble());
        }
    }

    // -- async I/O -------------------------------------------------------------------------------

    /** A lookup answered ``micros`` after it was asked, by a service that does not care how many
     * are in flight; the operator's capacity is its in-flight limit / the latency. */
    static final class Lookup extends RichAsyncFunction<Long, Long> {
        private final long micros;

        Lookup(long micros) {
            this.micros = micros;
        }

        @Override
        public void asyncInvoke(Long value, ResultFuture<Long> result) {
            TIMER.schedule(
                    () -> result.complete(Collections.singletonList(value)),
                    micros,
                    TimeUnit.MICROSECONDS);
        }
    }

    // -- sinks -----------------------------------------------------------------------------------

    /** A sink that sleeps ``micros`` per record: a store that keeps up slowly. */
    static final class SlowSink<T> implements Sink<T> {
        private final long micros;

        SlowSink(long micros) {
            this.micros = micros;
        }

        @Override
        public SinkWriter<T> createWriter(WriterInitContext context) {
            Sleep cost = new Sleep(micros);
            return new SinkWriter<T>() {
                @Override
                public void write(T element, Context ctx) throws InterruptedException {
                    cost.pay();
                }

                @Override
                public void flush(boolean endOfInput) {}

                @Override
                public void close() {}
            };
        }
    }

    /** A sink that buffers ``batch`` records and writes them at once, paying ``fixedMicros`` a
     * write plus ``micros`` a record (a bulk insert); its writes block the task thread. */
    static final class BatchSink<T> implements Sink<T> {
        private final int batch;
        private final long fixedMicros;
        private final long micros;

        BatchSink(int batch, long fixedMicros, long micros) {
            this.batch = batch;
            this.fixedMicros = fixedMicros;
            this.micros = micros;
        }

        @Override
        public SinkWriter<T> createWriter(WriterInitContext context) {
            return new SinkWriter<T>() {
                private int buffered;

                @Override
                public void write(T element, Context ctx) throws InterruptedException {
                    if (++buffered >= batch) {
                        writeBatch();
                    }
                }

                private void writeBatch() throws InterruptedException {
                    long total = fixedMicros + buffered * micros;
                    Thread.sleep(total / 1000, (int) (total % 1000) * 1000);
                    buffered = 0;
                }

                @Override
                public void flush(boolean endOfInput) throws InterruptedException {
                    if (buffered > 0) {
                        writeBatch();
                    }
                }

                @Override
                public void close() {}
            };
        }
    }
}
