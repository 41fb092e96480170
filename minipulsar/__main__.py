import sys

from minipulsar.cli.main import main

sys.exit(main())
