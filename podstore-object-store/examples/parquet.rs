//! A Parquet file written into podstore and read back through the object_store backend, by the
//! `parquet` crate's own async writer and reader: what DataFusion or Polars would do.
//!
//! Run: `cargo run -p podstore-object-store --example parquet [DIR]`
//!
//! It writes a table of 1,000,000 rows (three columns, four row groups) as one object through
//! object_store's `BufWriter` (a multipart upload), then opens it with `ParquetObjectReader`, reads
//! its footer and one column chunk of one row group, and prints how many bytes were read from
//! the store's files for that, against the file's size: range reads fetch only what the reader
//! asks for.
//!
//! The bytes read are the process's `rchar` in `/proc/self/io` (every byte its `read`/`pread`
//! calls returned) over the reading phase, in which only the store reads files.
//!
//! Without DIR the store lives in a fresh temporary directory, removed at the end. A given DIR
//! must be new, empty or a podstore store; the store is left there.

#[path = "../../examples/common/mod.rs"]
mod common;

use std::sync::Arc;

use arrow_array::{Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use common::{Args, Failure, finish, size};
use futures::TryStreamExt;
use object_store::buffered::BufWriter;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use parquet::arrow::arrow_reader::ArrowReaderOptions;
// Deprecated since parquet 59.2 in favour of an `AsyncFileReader` of one's own; still the
// crate's ready-made object_store reader, the one DataFusion-era code uses, and what this
// example is meant to show working on podstore.
#[allow(deprecated)]
use parquet::arrow::async_reader::ParquetObjectReader;
use parquet::arrow::{AsyncArrowWriter, ParquetRecordBatchStreamBuilder, ProjectionMask};
use parquet::file::properties::WriterProperties;
use podstore::Options;
use podstore_object_store::PodstoreObjectStore;

const USAGE: &str = "parquet [DIR]";
const ROWS: i64 = 1_000_000;
const ROW_GROUP: usize = 250_000;
/// Rows per record batch handed to the writer.
const BATCH: i64 = 50_000;

fn main() -> std::process::ExitCode {
    finish(run())
}

fn run() -> Result<(), Failure> {
    let dir = Args::parse(USAGE, &[], &[], 1)?.store_dir("parquet")?;
    let store = Arc::new(dir.open(Options::default())?);
    println!(
        "store in {} ({:?} I/O)",
        dir.path().display(),
        store.io_mode()
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .map_err(Failure::other)?;
    runtime.block_on(write_and_read(store.clone()))?;
    Arc::try_unwrap(store)
        .map_err(|_| Failure::other("the store is still in use"))?
        .close()?;
    println!("{}", dir.farewell());
    Ok(())
}

fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("price", DataType::Float64, false),
        Field::new("name", DataType::Utf8, false),
    ]))
}

fn price(id: i64) -> f64 {
    (id % 1000) as f64 * 0.25
}

/// Rows `start..start + BATCH`.
fn batch(start: i64) -> Result<RecordBatch, Failure> {
    let ids: Vec<i64> = (start..start + BATCH).collect();
    let prices: Vec<f64> = ids.iter().map(|&i| price(i)).collect();
    let names: Vec<String> = ids.iter().map(|i| format!("item-{i:08}")).collect();
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(ids)),
            Arc::new(Float64Array::from(prices)),
            Arc::new(StringArray::from(names)),
        ],
    )
    .map_err(Failure::other)
}

/// The bytes this process has read through `read`-like system calls so far.
fn bytes_read_by_process() -> Result<u64, Failure> {
    let io = std::fs::read_to_string("/proc/self/io")?;
    io.lines()
        .find_map(|l| l.strip_prefix("rchar: "))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| Failure::other("no rchar in /proc/self/io"))
}

async fn write_and_read(store: Arc<podstore::Store>) -> Result<(), Failure> {
    let objects: Arc<dyn ObjectStore> = Arc::new(PodstoreObjectStore::new(store.clone()));
    let path = Path::from("tables/items/part-0.parquet");

    // Write: BufWriter uploads what the parquet writer hands it as multipart parts.
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(ROW_GROUP))
        .build();
    let mut writer = AsyncArrowWriter::try_new(
        BufWriter::new(objects.clone(), path.clone()),
        schema(),
        Some(props),
    )
    .map_err(Failure::other)?;
    for start in (0..ROWS).step_by(BATCH as usize) {
        writer.write(&batch(start)?).await.map_err(Failure::other)?;
    }
    writer.close().await.map_err(Failure::other)?;
    let file_size = objects.head(&path).await.map_err(Failure::other)?.size;
    println!("wrote {path}: {ROWS} rows, {}", size(file_size));

    // Read: the footer, then one column chunk (price, row group 2).
    let before_stats = store.stats();
    let before = bytes_read_by_process()?;
    #[allow(deprecated)]
    let reader = ParquetObjectReader::new(objects.clone(), path.clone()).with_file_size(file_size);
    let builder =
        ParquetRecordBatchStreamBuilder::new_with_options(reader, ArrowReaderOptions::new())
            .await
            .map_err(Failure::other)?;
    let metadata = builder.metadata().clone();
    println!(
        "footer: {} row groups, {} columns",
        metadata.num_row_groups(),
        metadata.file_metadata().schema_descr().num_columns()
    );
    let group = 2;
    let chunk = metadata.row_group(group).column(1);
    let mask = ProjectionMask::roots(metadata.file_metadata().schema_descr(), [1]);
    let batches: Vec<RecordBatch> = builder
        .with_projection(mask)
        .with_row_groups(vec![group])
        .build()
        .map_err(Failure::other)?
        .try_collect()
        .await
        .map_err(Failure::other)?;
    let read = bytes_read_by_process()? - before;
    let after_stats = store.stats();

    // Check what came back: row group 2 is rows 500,000..750,000.
    let first = group as i64 * ROW_GROUP as i64;
    let mut sum = 0.0;
    let mut rows = 0;
    for b in &batches {
        let prices = b
            .column(0)
            .as_any()
            .downcast_ref::<Float64Array>()
            .ok_or_else(|| Failure::other("price is not a Float64 column"))?;
        sum += prices.values().iter().sum::<f64>();
        rows += b.num_rows();
    }
    let want: f64 = (first..first + ROW_GROUP as i64).map(price).sum();
    if rows != ROW_GROUP || sum != want {
        return Err(Failure::other(format!(
            "read {rows} rows summing to {sum}, expected {ROW_GROUP} summing to {want}"
        )));
    }
    println!(
        "read row group {group}'s price column: {rows} rows, sum {sum} (as written); the column \
         chunk is {} in the file",
        size(chunk.compressed_size() as u64)
    );
    println!(
        "bytes read from the store's files for the footer and that chunk: {} of a {} file ({:.1} %)",
        size(read),
        size(file_size),
        read as f64 * 100.0 / file_size as f64
    );
    println!(
        "read cache meanwhile: {} misses, {} hits",
        after_stats.cache_misses - before_stats.cache_misses,
        after_stats.cache_hits - before_stats.cache_hits
    );
    Ok(())
}
