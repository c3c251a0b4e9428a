"""What runs on an edge device (a Raspberry Pi): the Flower ClientApp and the market agent."""
