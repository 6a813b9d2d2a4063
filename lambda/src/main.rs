//! Placeholder for the AWS Lambda handler that will expose ddb-lock as a saga-friendly API.
//! Until it lands, use the library directly (see the README).

fn main() {
    eprintln!("ddb-lock-lambda: the Lambda handler is not built yet; use the ddb-lock library");
    std::process::exit(2);
}
