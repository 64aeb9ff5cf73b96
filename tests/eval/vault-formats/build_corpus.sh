#!/bin/sh
# The mixed-format docs corpus of tests/eval/vault-formats (issue 58), from public text on
# this machine: the Cargo book's reference chapters as the Rust toolchain ships them (HTML),
# the AWS CLI's topic pages and urllib3's guides (reStructuredText, Sphinx).
#   sh tests/eval/vault-formats/build_corpus.sh OUT_DIR
#   cairn eval vault --corpus OUT_DIR --queries tests/eval/vault-formats/tune/queries.jsonl \
#       --qrels tests/eval/vault-formats/tune/qrels.tsv      (and heldout/)
set -eu
out=$1
mkdir -p "$out/cargo" "$out/aws" "$out/urllib3"
cp "$(rustc --print sysroot)"/share/doc/rust/html/cargo/reference/*.html "$out/cargo/"
aws=$(python3 -c 'import awscli, os; print(os.path.dirname(awscli.__file__))')
cp "$aws"/topics/*.rst "$out/aws/"
u=/usr/lib/google-cloud-sdk/platform/gsutil/third_party/urllib3/docs
cp "$u/user-guide.rst" "$u/advanced-usage.rst" "$u/v2-migration-guide.rst" "$out/urllib3/"
