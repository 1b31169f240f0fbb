"""Services on 127.0.0.1 that the tests and the benchmarks share (never imported by the product).

    stores.py   real object-store protocol servers (moto's S3 server, gcp-storage-emulator),
                each a process of its own

Not under tests/ so that a benchmark never imports test code; not installed with the package
(pyproject.toml's packages are pipeline, training, jobs): the tests find it through pytest's
`pythonpath`, the benchmarks through the project root they put on sys.path.
"""
