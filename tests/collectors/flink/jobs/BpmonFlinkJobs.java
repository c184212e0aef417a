/*
 * Small Flink jobs with a controlled bottleneck, for bpmon's tests against a real cluster.
 *
 * Usage: BpmonFlinkJobs TOPOLOGY [PARALLELISM | CHECKPOINT_DIR [...]]
 *        (slow-map, hot-key, slow-sink, healthy, fan-in, flatmap, legacy-slow-map, same-names,
 *        partly-bounded, cpu-map; checkpoint-aligned, checkpoint-unaligned, big-state)
 *
 * slow-map:  numbers (4000/s) -> enrich (1 ms per record, 2 subtasks) -> sink
 * hot-key:   numbers (3000/s) -> keyBy (2/3 of records on one key) -> count (1.5 ms, 2) -> sink
 *            (the hot key is one Flink's key groups route to subtask 0, as bpmon's skew does)
 * slow-sink: numbers (1000/s) -> light (40 KB records) -> store (2 ms per record)
 * healthy:   numbers (200/s) -> enrich (0.2 ms, PARALLELISM, 2 by default) -> sink
 * fan-in:    left + right (1500/s each) -> merge (0.5 ms) -> sink
 * flatmap:   numbers (300/s) -> explode (10 records of 2 KB per record) -> store (1 ms per record)
 * legacy-slow-map: slow-map read from a legacy SourceFunction (its own thread) instead
 * same-names: numbers (3000/s) -> work (1 ms, 2) -> work (no cost, 2) -> sink: two vertices of
 *            the same name (Flink allows it), the first one slow
 * partly-bounded: left (1000 records at 500/s, then FINISHED) + right (500/s) -> merge
 *            (0.2 ms) -> sink: a job that keeps running after one of its sources finished
 * cpu-map:   numbers (2000/s) -> enrich (1 ms of CPU per record, spun, not slept) -> sink: a
 *            CPU-bound bottleneck (~1000 records/s alone), for the sampling-cost benchmark
 * wide P:    a large job for the large-job benchmark: numbers (P/32 subtasks, 2 records/s per
 *            subtask downstream) -> parse (P, rebalance) -> enrich (P, forward, 20 ms a record)
 *            -> score (P, forward) -> shrink (P/2, rescale) -> sink (3P/8, rescale): 500
 *            subtasks at P = 128, 19 at P = 5; pointwise exchanges after the first, so the
 *            channels (and network buffers) grow with the subtasks, not with their square
 *
 * The checkpointed jobs take CHECKPOINT_DIR (filesystem checkpoint storage, hashmap state
 * backend, set in the job's configuration as a user sets it):
 * checkpoint-aligned DIR [TIMEOUT_MS]: numbers (4000/s) -> enrich (4 ms per record, 2) -> sink,
 *            aligned checkpoints every second (timeout 60 s by default): each barrier waits
 *            seconds behind the buffered records of the slow enrich
 * checkpoint-unaligned DIR: the same, unaligned from the first barrier on (no aligned timeout)
 * big-state DIR [KEYS]: numbers (100/s) -> fill -> keyBy -> count -> sink: a count per key of
 *            KEYS keys (8 million by default, built in the first seconds), no backpressure;
 *            checkpoints every 5 s spend their time writing that state (their async phase)
 *
 * Every job but legacy-slow-map reads a rate-limited FLIP-27 generator source. Costs are paid by
 * sleeping (a thread that sleeps is busy for Flink's time accounting and for a stack sample, and
 * leaves the shared CPU to others). A parse map is chained to the source so a chained vertex is
 * always present; every other operator starts its own task (disableChaining), named as bpmon's
 * tests expect.
 */

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.FlatMapFunction;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.api.connector.sink2.WriterInitContext;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.source.legacy.SourceFunction;
import org.apache.flink.util.Collector;

import java.time.Duration;

public class BpmonFlinkJobs {

    /** Sleeps ``micros`` per record on average (one sleep per millisecond of debt). */
    static final class Cost implements java.io.Serializable {
        private final long micros;
        private long debt;

        Cost(long micros) {
            this.micros = micros;
        }

        void pay() throws InterruptedException {
            debt += micros;
            if (debt >= 1000) {
                Thread.sleep(debt / 1000);
                debt %= 1000;
            }
        }
    }

    /**
     * The hot key of the hot-key job: the first negative key (so no cold key equals it) that
     * Flink's key groups (max parallelism 128) send to subtask 0 of 2, where bpmon's scenario
     * key ``skew`` puts its hot key: the hot subtask is then subtask 0 in both, in the same
     * slot as the source, so its channel is local in both.
     */
    static final long HOT_KEY = firstKeyOnSubtaskZero(2);

    static long firstKeyOnSubtaskZero(int parallelism) {
        long key = -1;
        while (KeyGroupRangeAssignment.assignKeyToParallelOperator(key, 128, parallelism) != 0) {
            key--;
        }
        return key;
    }

    /** A map that costs ``micros`` per record. */
    static final class SlowMap implements MapFunction<Long, Long> {
        private final Cost cost;

        SlowMap(long micros) {
            this.cost = new Cost(micros);
        }

        @Override
        public Long map(Long value) throws Exception {
            cost.pay();
            return value;
        }
    }

    /** A map that spins on the CPU for ``micros`` per record (a parse, a model, a regex). */
    static final class CpuMap implements MapFunction<Long, Long> {
        private final long micros;

        CpuMap(long micros) {
            this.micros = micros;
        }

        @Override
        public Long map(Long value) {
            return CorpusParts.spin(micros, value) == 42 ? value + 1 : value;
        }
    }

    /** A sink that costs ``micros`` per record: an external system that keeps up slowly. */
    static final class SlowSink<T> implements Sink<T> {
        private final long micros;

        SlowSink(long micros) {
            this.micros = micros;
        }

        @Override
        public SinkWriter<T> createWriter(WriterInitContext context) {
            Cost cost = new Cost(micros);
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

    /**
     * Emits ``count`` records of ``size`` bytes per record in: a writer that cannot stop inside
     * one input record, which is what Flink's overdraft buffers (FLIP-227) are for.
     */
    static final class Explode implements FlatMapFunction<Long, byte[]> {
        private final int count;
        private final int size;

        Explode(int count, int size) {
            this.count = count;
            this.size = size;
        }

        @Override
        public void flatMap(Long value, Collector<byte[]> out) {
            for (int i = 0; i < count; i++) {
                out.collect(new byte[size]);
            }
        }
    }

    /**
     * A legacy source: its own thread emits ``rate`` numbers per second under the checkpoint
     * lock and never asks whether its output is available, as the legacy datagen did.
     */
    static final class LegacyNumbers implements SourceFunction<Long> {
        private final double rate;
        private volatile boolean running = true;

        LegacyNumbers(double rate) {
            this.rate = rate;
        }

        @Override
        public void run(SourceContext<Long> ctx) throws InterruptedException {
            long began = System.nanoTime();
            long emitted = 0;
            long next = 0;
            while (running) {
                long due = (long) ((System.nanoTime() - began) / 1e9 * rate);
                if (emitted >= due) {
                    Thread.sleep(1);
                    continue;
                }
                // held back for longer than a second: catch up on one second of records only
                emitted = Math.max(emitted, due - (long) rate);
                synchronized (ctx.getCheckpointLock()) {
                    ctx.collect(next++);
                }
                emitted++;
            }
        }

        @Override
        public void cancel() {
            running = false;
        }
    }

    /**
     * Checkpoints every ``intervalMs`` into ``dir`` (filesystem storage, hashmap state backend),
     * aligned or unaligned (then from the first barrier on: no aligned timeout), set as a user
     * sets them: in the job's configuration.
     */
    static void checkpointed(
            StreamExecutionEnvironment env,
            String dir,
            long intervalMs,
            long timeoutMs,
            boolean unaligned) {
        Configuration conf = new Configuration();
        conf.set(StateBackendOptions.STATE_BACKEND, "hashmap");
        conf.set(CheckpointingOptions.CHECKPOINT_STORAGE, "filesystem");
        conf.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, "file://" + dir);
        conf.set(CheckpointingOptions.CHECKPOINTING_INTERVAL, Duration.ofMillis(intervalMs));
        conf.set(CheckpointingOptions.CHECKPOINTING_TIMEOUT, Duration.ofMillis(timeoutMs));
        conf.set(CheckpointingOptions.ENABLE_UNALIGNED, unaligned);
        conf.set(CheckpointingOptions.ALIGNED_CHECKPOINT_TIMEOUT, Duration.ZERO);
        // a checkpoint that expires is counted, not a failover (Flink's default tolerates none)
        conf.set(CheckpointingOptions.TOLERABLE_FAILURE_NUMBER, Integer.MAX_VALUE);
        env.configure(conf);
    }

    /**
     * Builds a keyed state of ``keys`` keys fast, then keeps it: each of the first records in
     * (``keys / fan`` of them) emits ``fan`` new keys; every later one touches one key.
     */
    static final class Fill implements FlatMapFunction<Long, Long> {
        private final long keys;
        private final long fan;

        Fill(long keys, long fan) {
            this.keys = keys;
            this.fan = fan;
        }

        @Override
        public void flatMap(Long value, Collector<Long> out) {
            long first = value * fan;
            if (first < keys) {
                for (long k = first; k < Math.min(keys, first + fan); k++) {
                    out.collect(k);
                }
            } else {
                out.collect(value % keys);
            }
        }
    }

    /** Counts the records of each key: a ValueState of a Long per key. */
    static final class Count extends KeyedProcessFunction<Long, Long, Long> {
        private transient ValueState<Long> count;

        @Override
        public void open(OpenContext context) {
            count = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Long.class));
        }

        @Override
        public void processElement(Long key, Context ctx, Collector<Long> out) throws Exception {
            Long seen = count.value();
            long now = seen == null ? 1 : seen + 1;
            count.update(now);
            out.collect(now);
        }
    }

    static DataStream<Long> source(StreamExecutionEnvironment env, String name, double rate) {
        return source(env, name, rate, Long.MAX_VALUE);
    }

    static DataStream<Long> source(
            StreamExecutionEnvironment env, String name, double rate, long count) {
        DataGeneratorSource<Long> gen =
                new DataGeneratorSource<>(
                        index -> index, count, RateLimiterStrategy.perSecond(rate), Types.LONG);
        return env.fromSource(gen, WatermarkStrategy.noWatermarks(), name)
                .map(new SlowMap(0))
                .name("parse");
    }

    public static void main(String[] args) throws Exception {
        String topology = args.length > 0 ? args[0] : "slow-map";
        String arg = args.length > 1 ? args[1] : null;
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setParallelism(1);
        switch (topology) {
            case "checkpoint-aligned":
            case "checkpoint-unaligned": {
                // slow-map checkpointed every second, enrich at 4 ms a record: about 4 s of
                // records wait in the buffers ahead of an aligned barrier (1 s at 1 ms: too
                // close to bpmon's slow_ms to tell)
                long timeoutMs = args.length > 2 ? Long.parseLong(args[2]) : 60_000;
                checkpointed(env, arg, 1000, timeoutMs, topology.equals("checkpoint-unaligned"));
                source(env, "numbers", 4000)
                        .map(new SlowMap(4000)).name("enrich").setParallelism(2).disableChaining()
                        .sinkTo(new SlowSink<Long>(0)).name("sink").disableChaining();
                break;
            }
            case "slow-map":
                source(env, "numbers", 4000)
                        .map(new SlowMap(1000)).name("enrich").setParallelism(2).disableChaining()
                        .sinkTo(new SlowSink<Long>(0)).name("sink").disableChaining();
                break;
            case "hot-key":
                source(env, "numbers", 3000)
                        // 2/3 of the records on key 0; the rest over 334 keys, about half
                        // of them on each subtask (34 keys left one subtask nearly idle)
                        .keyBy(v -> v % 3 != 0 ? HOT_KEY : v % 1000)
                        .map(new SlowMap(1500)).name("count").setParallelism(2).disableChaining()
                        .sinkTo(new SlowSink<Long>(0)).name("sink").disableChaining();
                break;
            case "slow-sink":
                // 40 KB records span two 32 KB network buffers: the writer of "light" also
                // blocks inside a record (hard backpressure), not only between records.
                source(env, "numbers", 1000)
                        .map(v -> new byte[40_000]).returns(byte[].class).name("light")
                        .disableChaining()
                        .sinkTo(new SlowSink<byte[]>(2000)).name("store").disableChaining();
                break;
            case "healthy":
                source(env, "numbers", 200)
                        .map(new SlowMap(200)).name("enrich")
                        .setParallelism(arg != null ? Integer.parseInt(arg) : 2)
                        .disableChaining()
                        .sinkTo(new SlowSink<Long>(0)).name("sink").disableChaining();
                break;
            case "fan-in":
                source(env, "left", 1500)
                        .union(source(env, "right", 1500))
                        .map(new SlowMap(500)).name("merge").disableChaining()
                        .sinkTo(new SlowSink<Long>(0)).name("sink").disableChaining();
                break;
            case "flatmap":
                source(env, "numbers", 300)
                        .flatMap(new Explode(10, 2000)).returns(byte[].class).name("explode")
                        .disableChaining()
                        .sinkTo(new SlowSink<byte[]>(1000)).name("store").disableChaining();
                break;
            case "legacy-slow-map":
                env.addSource(new LegacyNumbers(4000), "numbers", Types.LONG)
                        .map(new SlowMap(0)).name("parse")
                        .map(new SlowMap(1000)).name("enrich").setParallelism(2).disableChaining()
                        .sinkTo(new SlowSink<Long>(0)).name("sink").disableChaining();
                break;
            case "same-names":
                source(env, "numbers", 3000)
                        .map(new SlowMap(1000)).name("work").setParallelism(2).disableChaining()
                        .map(new SlowMap(0)).name("work").setParallelism(2).disableChaining()
                        .sinkTo(new SlowSink<Long>(0)).name("sink").disableChaining();
                break;
            case "partly-bounded":
                source(env, "left", 500, 1000)
                        .union(source(env, "right", 500))
                        .map(new SlowMap(200)).name("merge").disableChaining()
                        .sinkTo(new SlowSink<Long>(0)).name("sink").disableChaining();
                break;
            case "cpu-map":
                source(env, "numbers", 2000)
                        .map(new CpuMap(1000)).name("enrich").disableChaining()
                        .sinkTo(new SlowSink<Long>(0)).name("sink").disableChaining();
                break;
            case "wide": {
                int p = arg != null ? Integer.parseInt(arg) : 128;
                env.setMaxParallelism(Math.max(128, p));
                DataGeneratorSource<Long> gen =
                        new DataGeneratorSource<>(
                                index -> index, Long.MAX_VALUE,
                                RateLimiterStrategy.perSecond(2.0 * p), Types.LONG);
                env.fromSource(gen, WatermarkStrategy.noWatermarks(), "numbers")
                        .setParallelism(Math.max(1, p / 32))
                        .rebalance()
                        .map(new SlowMap(0)).name("parse").setParallelism(p).disableChaining()
                        .map(new SlowMap(20_000)).name("enrich").setParallelism(p).disableChaining()
                        .map(new SlowMap(0)).name("score").setParallelism(p).disableChaining()
                        .rescale()
                        .map(new SlowMap(0)).name("shrink").setParallelism(Math.max(1, p / 2))
                        .disableChaining()
                        .rescale()
                        .sinkTo(new SlowSink<Long>(0)).name("sink")
                        .setParallelism(Math.max(1, 3 * p / 8)).disableChaining();
                break;
            }
            case "big-state": {
                long keys = args.length > 2 ? Long.parseLong(args[2]) : 8_000_000;
                checkpointed(env, arg, 5000, 60_000, false);
                source(env, "numbers", 100)
                        .flatMap(new Fill(keys, 10_000)).name("fill").disableChaining()
                        .keyBy(v -> v)
                        .process(new Count()).name("count").disableChaining()
                        .sinkTo(new SlowSink<Long>(0)).name("sink").disableChaining();
                break;
            }
            default:
                throw new IllegalArgumentException("unknown topology " + topology);
        }
        env.execute("bpmon-" + topology);
    }
}
